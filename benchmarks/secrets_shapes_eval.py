"""How well engram's redactor removes secrets as people write them, on tests/data/secrets_shapes.json.

Prints, per half of the set (tune, report) and for both: the share of secret values that no longer
appear after redaction, and the share of look-alikes (git logs, lockfiles, digests, UUIDs, CSS,
base64 fixtures, hashes asked about) left byte-identical, with what was missed or changed on the
tune half only (the report half is the measurement: its misses are counted, never shown). With
--locomo, also the share of LoCoMo chat turns left byte-identical (read at run time, never copied).

    python -m benchmarks.secrets_shapes_eval [--locomo ../shared/locomo/locomo10.json] [--results]

--results adds the figures, the command, the date and the commit to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.secrets_eval import score
from engram.core.redaction import Redactor

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets_shapes.json"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def locomo_kept(path: Path, redact: Redactor) -> tuple[int, int]:
    """(turns left byte-identical, turns) over every turn of every LoCoMo conversation."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = [
        t["text"]
        for conv in data
        for k, v in conv["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
        for t in v
        if t.get("text")
    ]
    return sum(1 for t in turns if redact(t) == t), len(turns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", type=Path, help="locomo10.json: also count its turns left byte-identical")
    ap.add_argument("--results", action="store_true", help="add the figures to benchmarks/RESULTS.md")
    args = ap.parse_args()
    items = json.loads(SET.read_text(encoding="utf-8"))["items"]
    redact = Redactor()
    lines = []
    for name in ("tune", "report", "both"):
        part = items if name == "both" else [i for i in items if i["split"] == name]
        s = score(part, redact)
        lines.append(
            f"{name:6} secrets removed {s['removed']:.3f} ({s['secrets'] - len(s['missed'])}/{s['secrets']}, "
            f"{s['kinds']} kinds); look-alikes byte-identical {s['kept']:.3f} "
            f"({s['look_alikes'] - len(s['changed'])}/{s['look_alikes']})"
        )
        print(lines[-1])
        if name == "tune":
            for m in s["missed"]:
                print(f"  missed: {m}")
            for c in s["changed"]:
                print(f"  changed: {c}")
    if args.locomo:
        kept, n = locomo_kept(args.locomo, redact)
        lines.append(f"LoCoMo turns byte-identical {kept / n:.4f} ({kept}/{n})")
        print(lines[-1])
    if args.results:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        command = "HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.secrets_shapes_eval " + " ".join(sys.argv[1:])
        section = (
            f"\n**Secrets as people write them** (`{command}`, {datetime.now(UTC):%Y-%m-%d}, commit {commit}; "
            f"tests/data/secrets_shapes.json):\n\n```\n" + "\n".join(lines) + "\n```\n"
        )
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write(section)


if __name__ == "__main__":
    main()
