"""benchmarks.capture_real.offline: the per-turn capture run over a transcript in one process,
its pitfalls scored against a label as a replay's are. A Claude Code session written here: a
test fails, the module it tests is edited, the test passes; a second prompt asks something else."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.capture_real import offline

SID = "9f0c2a10-0000-4000-8000-000000000001"
FAIL = (
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_money.py::test_split - AssertionError: assert [3, 3, 3] == [4, 3, 3]\n"
    "1 failed, 7 passed in 0.12s"
)


def _line(kind: str, content, **extra) -> str:
    entry = {"type": kind, "sessionId": SID, "cwd": "/home/dev/shop", "message": {"role": kind, "content": content}}
    return json.dumps({**entry, **extra}) + "\n"


def _call(n: int, name: str, args: dict) -> str:
    return _line("assistant", [{"type": "tool_use", "id": f"t{n}", "name": name, "input": args}], uuid=f"a{n}")


def _result(n: int, text: str, error: bool = False) -> str:
    return _line("user", [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text, "is_error": error}])


def _transcript() -> str:
    return "".join(
        [
            _line("user", "the split test fails, fix it please"),
            _call(1, "Bash", {"command": "pytest -q"}),
            _result(1, f"Exit code 1\n{FAIL}", error=True),
            _call(
                2,
                "Edit",
                {
                    "file_path": "/home/dev/shop/money/split.py",
                    "old_string": "    return [share] * parts\n",
                    "new_string": "    return [share + rest] + [share] * (parts - 1)\n",
                },
            ),
            _result(2, "The file has been updated."),
            _call(3, "Bash", {"command": "pytest -q"}),
            _result(3, "8 passed in 0.10s"),
            _line("assistant", [{"type": "text", "text": "Fixed: the remainder goes to the first share."}]),
            _line("user", "thanks, what does the README say about releases?"),
            _line("assistant", [{"type": "text", "text": "It says to tag from main."}]),
        ]
    )


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    corpus, labels = tmp_path / "corpus", tmp_path / "labels"
    corpus.mkdir()
    labels.mkdir()
    (corpus / "s1.jsonl").write_text(_transcript(), encoding="utf-8")
    row = {"id": "s1", "file": "s1.jsonl", "client": "claude-code", "repo": "dev/shop"}
    (corpus / "manifest.json").write_text(json.dumps([row]), encoding="utf-8")
    (corpus / "split.json").write_text(json.dumps({"tune": ["s1"], "report": []}), encoding="utf-8")
    label = {
        "id": "s1",
        "client": "claude-code",
        "fixes": [
            {
                "id": "f1",
                "origin": "agent-run",
                "match": ["test_split"],
                "fixed_by": "edit",
                "files": ["money/split.py"],
            },
            {"id": "f2", "origin": "user-pasted", "match": ["ECONNREFUSED"], "fixed_by": "edit", "files": []},
        ],
    }
    (labels / "s1.json").write_text(json.dumps(label), encoding="utf-8")
    return corpus, labels


def test_offline_capture_stores_the_fixed_test_and_scores_it_against_the_label(tmp_path):
    corpus, labels = _corpus(tmp_path)
    result, stored = offline.run(corpus, "tune", [], labels)
    [pitfall] = stored["s1"]
    assert pitfall["content"].startswith("Pitfall (pytest): FAILED tests/test_money.py::test_split")
    assert "Fixed by editing money/split.py" in pitfall["content"]
    assert "pitfall" in pitfall["tags"] and pitfall["metadata"]["capture"]["command"] == "pytest -q"
    summary = offline.summary(result["sessions"])
    assert summary["pitfalls"] == {"stored": 1, "right": 1, "labelled": 2, "found": 1}
    assert summary["pitfall_precision"] == 1.0 and summary["pitfall_recall"] == 0.5
    assert summary["pitfall_recall_by_origin"] == {"agent-run": 1.0, "user-pasted": 0.0}


def test_offline_cli_writes_the_scores(tmp_path, capsys):
    corpus, labels = _corpus(tmp_path)
    out = tmp_path / "offline.json"
    assert offline.main(["--corpus", str(corpus), "--labels", str(labels), "--json", str(out), "-v"]) == 0
    printed = capsys.readouterr().out
    assert "+ f1 Pitfall (pytest)" in printed and "MISS f2" in printed
    assert json.loads(out.read_text())["summary"]["pitfall_recall"] == 0.5
