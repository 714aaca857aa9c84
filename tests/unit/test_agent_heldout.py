"""The held-out agent-memory set: its labels hold what each kind promises, and benchmarks.agent_mcp runs it over MCP."""

from __future__ import annotations

import json
import re

import anyio
import pytest
import snowballstemmer

from benchmarks import agent_mcp

DATA = agent_mcp.load_set(agent_mcp.DEFAULT_SET)
MEMORIES = {m["key"]: m for m in DATA["memories"]}

# Function words; everything else counts as a content word. Broader than the engine's stopword list
# on purpose: this checks the labels, independently of how the engine tokenises.
FUNCTION_WORDS = frozenset(
    """
a an the and or but if then so of to in on at by for from with without into onto over under about after
before between through during up down out off as than too very is are was were be been being am do does did
done doing have has had having will would shall should can could may might must i me my mine we us our ours
you your yours he him his she her hers it its they them their theirs this that these those what which who whom
whose when where why how there here not no nor any all each every some such own same other just now also only
still yet again ever get got s e g
""".split()
)
_stem = snowballstemmer.stemmer("english").stemWord
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in FUNCTION_WORDS}


def of_kind(kind: str) -> list[dict]:
    return [q for q in DATA["queries"] if q["kind"] == kind]


def answer_words(q: dict) -> set[str]:
    return set().union(*(content_words(MEMORIES[k]["content"]) for k in q["expect"]))


def test_the_set_has_the_size_and_kinds_asked_for():
    assert len(DATA["memories"]) >= 80 and len(DATA["queries"]) >= 120
    counts = {k: len(of_kind(k)) for k in agent_mcp.KINDS}
    assert min(counts.values()) >= 15, counts
    assert sum(bool(_CJK.search(m["content"])) for m in DATA["memories"]) >= 10
    corrections = [m for m in DATA["memories"] if "corrects" in m]
    assert len(corrections) >= 3
    # A correction is asked about: some query expects the newer memory.
    assert all(any(m["key"] in q["expect"] for q in DATA["queries"]) for m in corrections)
    # and never the memory it corrects, which a correct store has replaced
    stale = {m["corrects"] for m in corrections}
    assert not [q["query"] for q in DATA["queries"] if stale & set(q["expect"])]


def test_paraphrases_share_no_content_word_with_their_answer():
    shared = {q["query"]: content_words(q["query"]) & answer_words(q) for q in of_kind("paraphrase")}
    assert {q: w for q, w in shared.items() if w} == {}


def test_distractors_share_a_word_with_a_wrong_memory_that_the_answer_lacks():
    lacking = []
    for q in of_kind("distractor"):
        incidental = content_words(q["query"]) - answer_words(q)
        wrong = [k for k, m in MEMORIES.items() if k not in q["expect"] and incidental & content_words(m["content"])]
        if not wrong:
            lacking.append(q["query"])
    assert lacking == []


def test_exact_queries_use_only_their_memory_s_words():
    extra = {q["query"]: content_words(q["query"]) - answer_words(q) for q in of_kind("exact")}
    assert {q: w for q, w in extra.items() if w} == {}


def test_typo_queries_misspell_a_word_of_their_memory():
    vocabulary = set().union(*(content_words(m["content"]) for m in DATA["memories"]))
    correct = [q["query"] for q in of_kind("typo") if content_words(q["query"]) <= vocabulary]
    assert correct == []


def test_chinese_queries_and_their_answers_are_cjk_text():
    for q in of_kind("chinese"):
        assert _CJK.search(q["query"]), q["query"]
        assert all(_CJK.search(MEMORIES[k]["content"]) for k in q["expect"]), q["query"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["queries"].append({"kind": "rumour", "query": "x", "expect": []}), "needs 'kind'"),
        (lambda d: d["queries"].append({"kind": "exact", "query": "x", "expect": ["nope"]}), "unknown key(s) ['nope']"),
        (
            lambda d: d["queries"].append({"kind": "none", "query": "x", "expect": ["user_name"]}),
            "none query expects []",
        ),
        (lambda d: d["memories"].append(dict(d["memories"][0])), "is used twice"),
        (lambda d: d["memories"].append({"key": "k", "content": "c", "corrects": "later"}), "not stored before it"),
    ],
)
def test_a_malformed_set_is_refused_naming_the_problem(tmp_path, change, message):
    data = json.loads(json.dumps(DATA))
    change(data)
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message)):
        agent_mcp.load_set(path)


@pytest.mark.model
def test_a_slice_runs_through_real_mcp_processes_and_exact_queries_hit(tmp_path):
    data = agent_mcp.slice_set(DATA, memories=30, per_kind=3)
    try:
        report = anyio.run(agent_mcp.run_set, data, tmp_path)
    finally:
        agent_mcp.stop_engram_daemon(tmp_path)
    assert list(report["modes"]) == list(agent_mcp.MODES)
    asked = {k: len([q for q in data["queries"] if q["kind"] == k]) for k in agent_mcp.KINDS}
    assert min(asked.values()) >= 1
    for mode, r in report["modes"].items():
        assert {k: v["n"] for k, v in r["kinds"].items()} == {k: asked[k] for k in agent_mcp.ANSWERED}
        assert all(0 <= v["hit1"] <= v["hit3"] <= 1 for v in r["kinds"].values())
        assert r["kinds"]["exact"]["hit1"] == 1.0, mode
        assert r["none"]["n"] == asked["none"] and 0 <= r["none"]["empty"] <= 1
        assert r["none"]["reinforced_memories"] <= r["none"]["mean_returned"] * asked["none"]
        assert sum(r["stores"]["actions"].values()) == len(data["memories"])
        assert len(report["details"][mode]) == len(data["queries"])
    assert report["context_none"]["n"] == asked["none"]
    table = agent_mcp.markdown(report)
    assert "| exact | 3 |" in table and "get_context on the 3 none queries" in table
