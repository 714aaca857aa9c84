"""What capture adds to the prompts' injections, judged by a reader: the items to judge, and the share judged relevant.

    python -m benchmarks.capture_real.judge items OUT [--judged DIR] > todo.jsonl
    python -m benchmarks.capture_real.judge score OUT --judged DIR [--judged DIR ...]

OUT is a run's `--out` folder (one folder per session with injections.jsonl). `items` lists every
memory line a prompt was given (turn, prompt, the line, its type) that no judgement in --judged
covers (the same session, turn and line were judged before: a reader's verdict does not change
with the run that produced it), one JSON object per line, for a reader to judge. The reader writes
judgements as benchmarks/capture_real/judgements/<session>.json does: {"session", "items": [{turn,
prompt, memory, type, relevant, why}]}. `score` counts, over every line the run injected, the
share judged relevant, by type; a line no judgement covers is counted as unjudged, never guessed.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

LINE_TYPE = "- ["  # "- [failure] ...", "- [convention] ...": one memory per line


def injected(out: Path) -> list[dict]:
    """Every memory line a prompt was given in the run kept in `out`, in session and turn order."""
    items = []
    for session in sorted(p for p in out.iterdir() if (p / "injections.jsonl").exists()):
        for line in (session / "injections.jsonl").read_text(encoding="utf-8").splitlines():
            inj = json.loads(line)
            if not inj.get("context") or inj.get("turn", 0) < 1:  # the session start's block is not a prompt's
                continue
            for row in inj["context"].splitlines():
                if row.startswith(LINE_TYPE) and "] " in row:
                    kind = row[len(LINE_TYPE) : row.index("] ")]
                    items.append(
                        {
                            "session": session.name,
                            "turn": inj["turn"],
                            "prompt": inj["prompt"],
                            "memory": row,
                            "type": kind,
                        }
                    )
    return items


def _key(session: str, turn: int, memory: str) -> tuple[str, int, str]:
    # By the turn, not the prompt's text: the judgement files replace a credential in a prompt by
    # <SECRET>. A turn is the same transcript turn in every run; the files keep 200 characters of a line.
    return session, int(turn), " ".join(memory[:150].split())


def judgements(folders: list[Path]) -> dict[tuple[str, int, str], bool]:
    verdicts: dict[tuple[str, int, str], bool] = {}
    for folder in folders:
        for f in sorted(folder.glob("*.json")):
            doc = json.loads(f.read_text(encoding="utf-8"))
            for it in doc["items"]:
                verdicts[_key(doc["session"], it["turn"], it["memory"])] = bool(it["relevant"])
    return verdicts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.capture_real.judge", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("items", "score"))
    p.add_argument("out", type=Path, help="a run's --out folder")
    p.add_argument("--judged", type=Path, action="append", default=[], help="folders of judgement files")
    a = p.parse_args(argv)
    verdicts = judgements(a.judged)
    items = injected(a.out)
    if a.what == "items":
        for it in items:
            if _key(it["session"], it["turn"], it["memory"]) not in verdicts:
                print(json.dumps(it, ensure_ascii=False))
        return 0
    counts: Counter[tuple[str, str]] = Counter()
    for it in items:
        v = verdicts.get(_key(it["session"], it["turn"], it["memory"]))
        counts[(it["type"], "unjudged" if v is None else "relevant" if v else "noise")] += 1
    kinds = sorted({k for k, _ in counts})
    total = {w: sum(counts[(k, w)] for k in kinds) for w in ("relevant", "noise", "unjudged")}
    judged = total["relevant"] + total["noise"]
    print(
        json.dumps(
            {
                "sessions": len({it["session"] for it in items}),
                "lines": len(items),
                **total,
                "relevant_share": round(total["relevant"] / judged, 3) if judged else None,
                "by_type": {k: {w: counts[(k, w)] for w in ("relevant", "noise", "unjudged")} for k in kinds},
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
