"""Sentence-level precision and recall of engram.text.convention_sentences on the labelled prompts.

    python -m benchmarks.conventions_eval [--misses tune]

tests/data/convention_prompts.json holds user prompts, each labelled with the convention
sentences it states (as they should be stored), split into a tune and a report half before
any rule was written. A found sentence counts as right when it is a labelled one of its prompt:
the same words once case, spacing and punctuation are set aside (or one holds the other and is
at least 80 % of its length). Rules are tuned on the tune half; the report half is the figure.
The fresh rows were written after the rules were frozen, and scored once.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from engram.text.convention_sentences import conventions_in

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "convention_prompts.json"


def load_set(path: Path = SET) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["prompts"]


def _norm(s: str) -> str:
    return re.sub(r"[\W_]+", "", s.casefold())


def same_sentence(found: str, labelled: str) -> bool:
    a, b = _norm(found), _norm(labelled)
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return bool(short) and short in long_ and len(short) >= 0.8 * len(long_)


def score(rows: list[dict]) -> dict:
    """{prompts, labelled, found, right, precision, recall, misses}: misses lists what was
    found wrongly (false) and what was not found (missed), per prompt."""
    labelled = found = right = 0
    misses = []
    for r in rows:
        got = conventions_in(r["prompt"])
        want = list(r["conventions"])
        hits = [g for g in got if any(same_sentence(g, w) for w in want)]
        labelled += len(want)
        found += len(got)
        right += len(hits)
        false = [g for g in got if g not in hits]
        missed = [w for w in want if not any(same_sentence(g, w) for g in got)]
        if false or missed:
            misses.append({"id": r["id"], "prompt": r["prompt"], "false": false, "missed": missed})
    return {
        "prompts": len(rows),
        "labelled": labelled,
        "found": found,
        "right": right,
        "precision": round(right / found, 3) if found else 1.0,
        "recall": round(right / labelled, 3) if labelled else 1.0,
        "misses": misses,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misses", choices=("tune", "report", "fresh"), help="also list one part's errors")
    ap.add_argument("--speed", action="store_true", help="also time conventions_in over every prompt, 20 times")
    args = ap.parse_args(argv)
    rows = load_set()
    out = {}
    for half in ("tune", "report", "fresh"):
        s = score([r for r in rows if r["half"] == half])
        out[half] = {k: v for k, v in s.items() if k != "misses" or args.misses == half}
    if args.speed:
        prompts = [r["prompt"] for r in rows] * 20
        t = time.perf_counter()
        for p in prompts:
            conventions_in(p)
        took = time.perf_counter() - t
        out["speed"] = {
            "prompts": len(prompts),
            "seconds": round(took, 3),
            "prompts_per_s": round(len(prompts) / took),
            "us_each": round(took / len(prompts) * 1e6),
        }
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
