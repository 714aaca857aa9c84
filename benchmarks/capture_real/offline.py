"""Pitfall capture on real sessions in one process: each transcript written turn by turn as the
replay writes it, the per-turn capture (engram.hooks.turn_capture.capture_turns, its state kept
on disk between turns as in the hook) run after each turn, and the fixes it sends kept as the
daemon keeps them (one pitfall per key in a repository's store), then scored against the labels
as `python -m benchmarks.capture_real` scores a replay. No hook process, no daemon, no model: a
whole half in a minute, to tune the pitfall rules; the replay stays the figure of record.

    python -m benchmarks.capture_real.offline --corpus <corpus> --half tune [--only ID ...] [-v]

`-v` lists per session each pitfall stored (+ right, - wrong) and each labelled pair not found.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.capture_real.__main__ import LABELS, _label, _select, credits, pitfall_summary, score_session
from benchmarks.capture_real.replay import READERS, Recording
from engram.continuity.fixes import Fix
from engram.core.settings import Settings
from engram.hooks.turn_capture import capture_turns
from engram.workflows.capture import fix_from_dict, pitfall_metadata, pitfall_tags


class _Daemon:
    """The daemon's side of a capture, as far as pitfalls go: the fixes each call sends."""

    def __init__(self) -> None:
        self.fixes: list[dict] = []

    def __enter__(self) -> _Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def call(self, op: str, **kw: Any) -> dict:
        if op == "session_capture":
            self.fixes += kw.get("fixes") or []
            return {"fixes": len(kw.get("fixes") or []), "episodes": 0}
        return {}


def session_fixes(rec: Recording, home: Path, work: Path) -> list[Fix]:
    """The fixes per-turn capture sends over the recording, in order, each turn captured once it is over."""
    settings = Settings.from_env({}, home=home, capture_episodes=False, capture_conventions=False)
    transcript = work / f"transcript{rec.suffix}"
    payload = {"session_id": rec.session_id, "transcript_path": str(transcript)}
    daemon = _Daemon()
    root = rec.cwd or str(work)
    for turn in rec.turns:
        rec.write(transcript, turn.end)
        capture_turns(settings, rec.client, payload, lambda: daemon, root)
    if not rec.turns:
        rec.write(transcript, len(rec.units))
        capture_turns(settings, rec.client, payload, lambda: daemon, root)
    return [fix_from_dict(f) for f in daemon.fixes]


def pitfall_memory(fix: Fix) -> dict:
    """The pitfall the daemon stores for a new fix (engram.workflows.capture), as an export row."""
    return {
        "id": fix.key,
        "memory_type": "failure",
        "content": fix.content(),
        "tags": ["auto-captured", *pitfall_tags(fix)],
        "metadata": pitfall_metadata(fix),
    }


def run(corpus: Path, half: str, only: list[str], labels: Path = LABELS) -> dict:
    rows, unlabelled = _select(corpus, half, only, labels)
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    scores, stored = [], {}
    with tempfile.TemporaryDirectory(prefix="capture-offline-") as scratch:
        for sessions in by_repo.values():
            keys: set[str] = set()  # the repository's store: the same fix again is not new
            for r in sorted(sessions, key=lambda r: r["id"]):
                home, work = Path(scratch) / r["id"] / "home", Path(scratch) / r["id"] / "work"
                home.mkdir(parents=True)
                work.mkdir()
                new = []
                for fix in session_fixes(READERS[r["client"]](corpus / r["file"]), home, work):
                    if fix.key not in keys:
                        keys.add(fix.key)
                        new.append(pitfall_memory(fix))
                label = _label(r["id"], labels)
                scores.append(score_session(label, new))
                stored[r["id"]] = new
    scores.sort(key=lambda s: s["id"])
    return {"half": "the sessions named" if only else half, "unlabelled": unlabelled, "sessions": scores}, stored


def summary(scores: list[dict]) -> dict:
    """Pitfall precision and recall, all and by origin and for Codex sessions."""
    return {"sessions": len(scores), **pitfall_summary(scores)}


def _details(label: dict, new: list[dict]) -> list[str]:
    out = []
    fixes = label.get("fixes") or []
    for m in new:
        hit = [f["id"] for f in fixes if credits(f, m)]
        out.append(f"  {'+' if hit else '-'} {' '.join(hit)} {m['content'].splitlines()[0][:180]}")
    for f in fixes:
        if not any(credits(f, m) for m in new):
            out.append(f"  MISS {f['id']} {f.get('origin')} {f.get('fixed_by')}: {f.get('headline', '')[:140]}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.capture_real.offline", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, required=True, help="folder with manifest.json, split.json, sessions")
    p.add_argument("--half", choices=("tune", "report", "all"), default="tune")
    p.add_argument("--only", nargs="*", default=[], help="session ids (instead of a half)")
    p.add_argument("--labels", type=Path, default=LABELS, help="label files (default: the committed ones)")
    p.add_argument("--json", type=Path, help="write the sessions' scores and pitfalls here")
    p.add_argument("-v", "--verbose", action="store_true", help="each pitfall stored, each labelled pair missed")
    a = p.parse_args(argv)
    result, stored = run(a.corpus, a.half, a.only, a.labels)
    result["summary"] = summary(result["sessions"])
    if a.verbose:
        for s in result["sessions"]:
            pf = s["pitfalls"]
            print(f"== {s['id']}: {pf['right']}/{pf['stored']} right, {pf['found']}/{pf['labelled']} found")
            print("\n".join(_details(_label(s["id"], a.labels) or {}, stored[s["id"]])))
    if a.json:
        a.json.write_text(json.dumps({**result, "stored": stored}, indent=1, ensure_ascii=False), encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("half", "unlabelled", "summary")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
