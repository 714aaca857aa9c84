"""Embedding latency, torch vs ONNX Runtime: one query (ms, p50/p90) and batches (ms per text).

    python scripts/embed_bench.py [--queries 100] [--texts 128] [--rounds 3] [--busy]

--busy keeps the other core busy (a spinning process) during the batch runs, as other work
on a shared machine would. Short: about half a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = [
    "deploy",
    "service",
    "replica",
    "cluster",
    "timeout",
    "retry",
    "postgres",
    "redis",
    "owner",
    "alert",
    "latency",
    "pipeline",
    "staging",
    "production",
    "version",
    "upgrade",
    "dashboard",
    "customer",
    "script",
    "nightly",
    "the",
    "a",
    "of",
    "to",
    "from",
    "in",
    "on",
    "with",
    "is",
    "was",
    "every",
    "when",
    "after",
    "before",
]


def text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize() + "."


def spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def ms_per_text(configs: dict, texts: list[str], rounds: int) -> dict[str, float]:
    """Median over rounds; each round runs every configuration once, in a rotated order, so
    all of them see the same background load."""
    names = list(configs)
    times: dict[str, list[float]] = {n: [] for n in names}
    for n in names:
        configs[n](texts[:16])  # warm-up
    for r in range(rounds):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            t = time.perf_counter()
            configs[n](texts)
            times[n].append(time.perf_counter() - t)
    return {n: round(statistics.median(ts) * 1000 / len(texts), 2) for n, ts in times.items()}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--texts", type=int, default=128, help="batch size (store_many embeds waves of 128)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="keep the other core busy during the batch runs")
    a = ap.parse_args(argv)

    import onnxruntime as ort

    from engram.models.embedding import SentenceTransformerEmbedder

    rng = random.Random(3)
    queries = [text(rng, 3, 12) for _ in range(a.queries)]
    texts = [text(rng, 6, 30) for _ in range(a.texts)]
    tmp = tempfile.TemporaryDirectory(prefix="engram-embed-bench-")  # the exported graph: ~90 MB
    cache = Path(tmp.name)
    onnx = SentenceTransformerEmbedder(cache_dir=cache, threads=1)
    torch_ = SentenceTransformerEmbedder(cache_dir=cache, threads=1, onnx=False)
    assert onnx.backend == "onnx", "ONNX Runtime is not in use; see the log"
    out: dict = {"cpus": os.cpu_count(), "load": os.getloadavg()[0]}

    # One query, one thread each, interleaved so both see the same background load.
    lat: dict[str, list[float]] = {"torch": [], "onnx": []}
    for q in queries[:5]:
        onnx._embed_one(q), torch_._embed_one(q)
    for q in queries:
        for name, emb in (("torch", torch_), ("onnx", onnx)):
            t = time.perf_counter()
            emb._embed_one(q)
            lat[name].append((time.perf_counter() - t) * 1000)
    for name, xs in lat.items():
        xs.sort()
        out[f"query_{name}_p50_ms"] = round(xs[len(xs) // 2], 2)
        out[f"query_{name}_p90_ms"] = round(xs[int(len(xs) * 0.9)], 2)

    def spinning_session(threads: int):
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(str(onnx.onnx_file), so, providers=["CPUExecutionProvider"])

    def onnx_batch(session):  # embed_batch's path: sorted by length, batches of 64
        def run(ts):
            for i in range(0, len(ts), 64):
                onnx._onnx.run_in(session, onnx._tokenize(ts[i : i + 64]))

        return run

    def torch_batch(large: bool):
        def run(ts):
            for i in range(0, len(ts), 64):
                torch_._torch.run(torch_._tokenize(ts[i : i + 64]), large)

        return run

    texts.sort(key=len, reverse=True)
    configs = {
        "onnx_1thread": onnx_batch(onnx._onnx.session),
        "onnx_2threads": onnx_batch(onnx._onnx.large_session()),  # what large batches use (no spinning)
        "onnx_2threads_spinning": onnx_batch(spinning_session(2)),  # ORT's default
        "torch_1thread": torch_batch(False),
        "torch_2threads": torch_batch(True),  # what the torch path's large batches use
    }
    assert onnx._onnx.large_session() is not onnx._onnx.session
    stop = mp.Event()
    burner = mp.Process(target=spin, args=(stop,), daemon=True) if a.busy else None
    if burner:
        burner.start()
    try:
        for name, v in ms_per_text(configs, texts, a.rounds).items():
            out[f"batch{a.texts}_{name}_ms_per_text"] = v
    finally:
        if burner:
            stop.set()
            burner.join()
    out["busy_other_core"] = a.busy
    tmp.cleanup()
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
