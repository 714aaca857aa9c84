"""How well engram's redactor removes secrets and keeps look-alikes, on tests/data/secrets_set.json.

Prints, per half of the set (tune, report) and for both: the share of secret values that no longer
appear after redaction, the share of look-alikes left byte-identical, and what was missed; then the
redactor's cost (µs per typical memory, per 10 kB text). With --locomo, also the share of LoCoMo
chat turns left byte-identical (read at run time, never copied).

    python -m benchmarks.secrets_eval [--locomo ../shared/locomo/locomo10.json] [--writes]

--writes: CPU per Engram.store() of the set's texts (in-memory store, the fake embedder), with the
redactor and with none, the two alternating: what redaction adds to a write.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from engram.core.redaction import Redactor

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets_set.json"


def score(items: list[dict], redact: Redactor) -> dict:
    secrets = [(it, s) for it in items for s in it["secrets"]]
    looks = [it for it in items if not it["secrets"]]
    missed = [f"{it['kind']}/{it['where']}" for it, s in secrets if s in redact(it["text"])]
    changed = [
        f"{it['kind']}: {it['text'][:60]!r} -> {redact(it['text'])[:60]!r}"
        for it in looks
        if redact(it["text"]) != it["text"]
    ]
    return {
        "secrets": len(secrets),
        "kinds": len({it["kind"] for it, _ in secrets}),
        "removed": 1 - len(missed) / max(len(secrets), 1),
        "missed": missed,
        "look_alikes": len(looks),
        "kept": 1 - len(changed) / max(len(looks), 1),
        "changed": changed,
    }


def per_text_us(redact_cls: type, text: str, runs: int) -> float:
    """CPU µs per call, best of 3: CPU time, as the machine may be shared (wall time is not the code's)."""
    best = float("inf")
    redact_cls()(text)  # the detectors' patterns are loaded on first need
    for _ in range(3):
        r = redact_cls()  # a new one each round: its memory of recent outputs must not answer
        t = time.process_time()
        for i in range(runs):
            r(text + f" #{i}")
        best = min(best, (time.process_time() - t) / runs * 1e6)
    return best


def store_cost_us(texts: list[str], redact: bool) -> float:
    """CPU µs per store() of each text, redacted or not (a Redactor that returns its input)."""
    import tempfile

    import engram.engine.state as parts
    from engram import Engram, Settings
    from engram.models.embedding import FakeEmbedder

    given = parts.Redactor
    if not redact:
        parts.Redactor = type(
            "NoRedaction",
            (),
            {"__init__": lambda self, *a: None, "__call__": lambda self, t: t, "value": lambda self, v: v},
        )
    try:
        with tempfile.TemporaryDirectory() as home:
            eng = Engram(":memory:", settings=Settings.from_env({"ENGRAM_HOME": home}), embedder=FakeEmbedder())
            t = time.process_time()
            for i, x in enumerate(texts):
                eng.store(f"{x} ({i})")
            spent = time.process_time() - t
            eng.close()
    finally:
        parts.Redactor = given
    return spent / len(texts) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", type=Path, help="locomo10.json: also count its turns left byte-identical")
    ap.add_argument("--writes", action="store_true", help="also the CPU a redacted store() costs")
    args = ap.parse_args()
    items = json.loads(SET.read_text(encoding="utf-8"))["items"]
    redact = Redactor()
    for name, part in (
        ("tune", [i for i in items if i["split"] == "tune"]),
        ("report", [i for i in items if i["split"] == "report"]),
        ("both", items),
    ):
        s = score(part, redact)
        print(
            f"{name:6} secrets removed {s['removed']:.3f} ({s['secrets'] - len(s['missed'])}/{s['secrets']}, "
            f"{s['kinds']} kinds); look-alikes byte-identical {s['kept']:.3f} "
            f"({s['look_alikes'] - len(s['changed'])}/{s['look_alikes']})"
        )
        if name == "both":
            for m in s["missed"]:
                print(f"  missed: {m}")
            for c in s["changed"]:
                print(f"  changed: {c}")
    memory = (
        "Fixed the flaky upload test: the S3 client retried on 503 but the mock returned 500, so "
        "tests/unit/test_upload.py now waits on the retry counter instead. See commit 3f2a9c1; "
        "numpy 1.26.4 stays pinned."
    )
    ten_kb = "\n".join(
        f"$ pytest -q tests/unit/test_{i}.py\n{i * 7} passed in {i}.2s, build 3f2a9c1e at /home/ana/src/api"
        for i in range(160)
    )[:10_000]
    print(
        f"CPU cost: {per_text_us(Redactor, memory, 400):.0f} µs per typical memory ({len(memory)} chars), "
        f"{per_text_us(Redactor, ten_kb, 40) / 1000:.2f} ms per 10 kB command output"
    )
    if args.writes:
        texts = [it["text"] for it in items] * 2
        runs = [(r, store_cost_us(texts, r)) for r in (False, True, False, True)]
        for r in (False, True):
            print(
                f"store() {'with' if r else 'without'} redaction: "
                + ", ".join(f"{us:.0f}" for done, us in runs if done == r)
                + " µs CPU per call"
            )
    if args.locomo:
        data = json.loads(args.locomo.read_text(encoding="utf-8"))
        turns = [
            t["text"]
            for conv in data
            for k, v in conv["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
            if t.get("text")
        ]
        changed = [t for t in turns if redact(t) != t]
        kept = len(turns) - len(changed)
        print(f"LoCoMo turns byte-identical {kept / len(turns):.4f} ({kept}/{len(turns)})")
        for t in changed[:10]:
            print(f"  changed: {t[:100]!r} -> {redact(t)[:100]!r}")


if __name__ == "__main__":
    main()
