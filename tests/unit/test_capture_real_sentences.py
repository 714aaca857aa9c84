"""The sentence-level scorer of the real-session benchmark, on a session written here."""

import json

from benchmarks.capture_real.sentences import run


def _session(path, prompts):
    rows = [{"type": "user", "sessionId": "s1", "message": {"role": "user", "content": p}} for p in prompts]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_statements_are_scored_against_the_labels_standing_and_candidates_apart(tmp_path):
    corpus, labels = tmp_path / "corpus", tmp_path / "labels"
    corpus.mkdir()
    labels.mkdir()
    _session(
        corpus / "a.jsonl",
        [
            "In this repo we install packages with uv, never pip. Can you add httpx?",  # standing, right
            "We always deploy on Fridays.",  # standing, not labelled: wrong
            "Store the game state in Redis.",  # a candidate, right
            "Fix the login test.",  # nothing
        ],
    )
    (corpus / "manifest.json").write_text(
        json.dumps([{"id": "a", "file": "a.jsonl", "client": "claude-code", "repo": "x/y"}])
    )
    (corpus / "split.json").write_text(json.dumps({"tune": ["a"], "report": []}))
    label = {
        "id": "a",
        "conventions": [
            {"quote": "we install packages with uv", "match": ["uv", "pip"]},
            {"quote": "store game state in Redis", "match": ["redis"]},
            {"quote": "never force-push", "match": ["force-push"]},
        ],
    }
    (labels / "a.json").write_text(json.dumps(label))
    r = run(corpus, "tune", labels)
    assert (r["stored"], r["right"], r["candidates"], r["candidates_right"]) == (2, 1, 1, 1)
    assert (r["labelled"], r["found"], r["found_with_candidates"]) == (3, 1, 2)
    assert r["precision"] == 0.5 and r["recall_with_candidates"] == 0.667
