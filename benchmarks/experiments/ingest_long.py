"""Ingest of long texts against the model's own encoding of the same chunks (issue 27).

    python -m benchmarks.experiments.ingest_long [--texts 200] [--rounds 3] [--out FILE]

Builds N distinct long texts (about 3,800 characters, four or five chunks each) from the
assistant turns of tests/data/long_sessions.json, two different turns per text. In one sitting,
alternating, each round times
- store: Engram.store_many of the N texts into a new in-memory engine (chunking, embedding,
  write-time resolution, index and rows), and
- encode: the embedder's embed_batch over exactly the chunks store_many embeds
  (engram.text.chunking.split_chunks with the engine's chunk settings), in one call;
and reports the medians and their ratio, store / encode. A ratio is the figure to read on a
shared machine: both halves of it run under the same load, which is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def long_texts(n: int) -> list[str]:
    """N distinct texts, each two different assistant turns of the long-session set."""
    from ..long_sessions import default_set_path, load_set

    doc = load_set(default_set_path())
    turns = [t["content"] for s in doc["sessions"] for t in s["turns"] if t["role"] == "assistant"]
    pairs = [(a, b) for a in range(len(turns)) for b in range(len(turns)) if a != b]
    if n > len(pairs):
        raise ValueError(f"at most {len(pairs)} distinct texts from this set")
    step = max(1, len(pairs) // n)
    return [turns[a] + "\n\n" + turns[b] for a, b in pairs[::step][:n]]


def measure(n: int, rounds: int) -> dict:
    from engram import Engram, Settings
    from engram.models.embedding import load_embedder
    from engram.text.chunking import split_chunks

    settings = Settings.from_env()
    emb = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    texts = long_texts(n)
    chunks = [c for t in texts for c in split_chunks(t, settings.chunk_size, settings.chunk_overlap)]
    emb.embed_batch(chunks[:64])  # warm up: the first batches set up the sessions
    store_s, encode_s, memories = [], [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        emb.embed_batch(chunks)
        encode_s.append(time.perf_counter() - t0)
        eng = Engram(":memory:", settings=settings, embedder=emb)
        try:
            t0 = time.perf_counter()
            results = eng.store_many([{"content": t} for t in texts])
            store_s.append(time.perf_counter() - t0)
            memories = sum(len(r.chunks) or 1 for r in results)
        finally:
            eng.close()
    store, encode = statistics.median(store_s), statistics.median(encode_s)
    return {
        "texts": n,
        "chars": sum(map(len, texts)),
        "chunks": len(chunks),
        "memories": memories,
        "store_s": store_s,
        "encode_s": encode_s,
        "store": store,
        "encode": encode,
        "ratio": store / encode,
        "backend": getattr(emb, "backend", "?"),
        "load": os.getloadavg(),
    }


def markdown(r: dict, command: str) -> str:
    return (
        f"Command: `{command}` ({datetime.now(timezone.utc):%Y-%m-%d}; load "
        f"{r['load'][0]:.1f} / {r['load'][1]:.1f} / {r['load'][2]:.1f}; {r['backend']} backend).\n\n"
        f"{r['texts']} long texts ({r['chars']:,} characters, {r['chunks']} chunks, stored as "
        f"{r['memories']} memories). Median of {len(r['store_s'])} alternating rounds:\n\n"
        "| | seconds | chunks/s |\n|---|---:|---:|\n"
        f"| encode the chunks (embed_batch, one call) | {r['encode']:.2f} | {r['chunks'] / r['encode']:.1f} |\n"
        f"| Engram.store_many | {r['store']:.2f} | {r['chunks'] / r['store']:.1f} |\n\n"
        f"store / encode: **{r['ratio']:.2f}×** (rounds: store "
        + ", ".join(f"{x:.2f}" for x in r["store_s"])
        + "; encode "
        + ", ".join(f"{x:.2f}" for x in r["encode_s"])
        + ").\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.experiments.ingest_long", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="also write the markdown here")
    args = ap.parse_args(argv)
    r = measure(args.texts, args.rounds)
    command = "python -m benchmarks.experiments.ingest_long " + " ".join(argv if argv is not None else sys.argv[1:])
    md = markdown(r, command.strip())
    print(md)
    if args.out:
        Path(args.out).write_text(md, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
