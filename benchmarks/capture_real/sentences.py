"""The convention rules alone on real sessions: each labelled session read as the hooks' checkpoint
reads it (engram.hooks.formats: the prompts that state a convention, and those that pick an option
the agent's message before them offered, with that message) and what the daemon's capture makes of
them (engram.continuity.conventions.statements_said), in this process, scored against the labels
without replaying the hooks (seconds instead of the replay's half hour, for tuning a rule).

    python -m benchmarks.capture_real.sentences --corpus DIR --half tune [--show]

Scored as the replay scores a store (benchmarks/capture_real/__main__.py): a statement said as
standing is a convention, the others candidates (held, not injected); a statement is right when
it matches a labelled convention's regexes. What the replay adds and this does not: a candidate
said again in another session of the repository is confirmed; the hooks read the transcript as
their client writes it. `--show` lists each session's statements (+ right, - wrong) and the
labelled conventions none of them matched.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.capture_real.__main__ import LABELS, _label, _matches, _ratio, _select
from benchmarks.capture_real.replay import READERS as RECORDINGS
from engram.continuity.conventions import statements_said
from engram.hooks.formats import READERS
from engram.hooks.transcript import Session


def session_statements(path: Path, client: str) -> dict[str, bool]:
    """Each statement the session's prompts make, with whether any saying of it was standing:
    what the checkpoint sends (Session.stated, Session.answers) as the daemon reads it, from the
    transcript as the replay writes it for the hooks (Gemini CLI's logs.json as a chat)."""
    rec = RECORDINGS[client](path)
    with tempfile.TemporaryDirectory() as tmp:
        written = Path(tmp) / f"transcript{rec.suffix}"
        rec.write(written, len(rec.units))
        s = Session(client=client)
        READERS[client](written, s)
    return statements_said(s.stated, [(a["prompt"], a["offered"]) for a in s.answers])


def score_statements(label: dict, said: dict[str, bool]) -> dict:
    """One session's statements against its label's conventions."""
    wanted = [c.get("match") or [] for c in label.get("conventions") or []]

    def right(s: str) -> bool:
        return any(_matches(m, s) for m in wanted)

    standing = [s for s, st in said.items() if st]
    held = [s for s, st in said.items() if not st]
    return {
        "stored": len(standing),
        "right": sum(map(right, standing)),
        "candidates": len(held),
        "candidates_right": sum(map(right, held)),
        "labelled": len(wanted),
        "found": sum(any(_matches(m, s) for s in standing) for m in wanted),
        "found_with_candidates": sum(any(_matches(m, s) for s in said) for m in wanted),
        "missed": [
            c["quote"]
            for c, m in zip(label["conventions"], wanted, strict=True)
            if not any(_matches(m, s) for s in said)
        ],
    }


def run(corpus: Path, half: str, labels: Path = LABELS, show: bool = False) -> dict:
    rows, _ = _select(corpus, half, [], labels)
    total: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        sid, label = row["id"], _label(row["id"], labels) or {}
        said = session_statements(corpus / row["file"], row["client"])
        s = score_statements(label, said)
        for k, v in s.items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
        if show:
            wanted = [c.get("match") or [] for c in label.get("conventions") or []]
            print(
                f"== {sid}: standing {s['right']}/{s['stored']}, candidates {s['candidates_right']}/{s['candidates']}"
            )
            for text, standing in said.items():
                mark = "+" if any(_matches(m, text) for m in wanted) else "-"
                print(f"  {'S' if standing else 'C'} {mark} {text[:160]}")
            for q in s["missed"]:
                print(f"  missed: {q[:160]}")
    return {
        "half": half,
        **total,
        "precision": _ratio(total.get("right", 0), total.get("stored", 0)),
        "recall": _ratio(total.get("found", 0), total.get("labelled", 0)),
        "recall_with_candidates": _ratio(total.get("found_with_candidates", 0), total.get("labelled", 0)),
        "candidate_precision": _ratio(total.get("candidates_right", 0), total.get("candidates", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, required=True, help="folder with manifest.json, split.json, sessions")
    p.add_argument("--half", choices=("tune", "report"), default="tune")
    p.add_argument("--labels", type=Path, default=LABELS)
    p.add_argument("--show", action="store_true", help="list each session's statements and what they missed")
    a = p.parse_args(argv)
    print(json.dumps(run(a.corpus, a.half, a.labels, a.show), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
