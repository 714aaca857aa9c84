"""The second stage's pure parts: locating the model files, the reordering, the confidence rule."""

from __future__ import annotations

import numpy as np
import pytest

from engram.errors import ModelUnavailable
from engram.rerank import reranker_files
from engram.retrieve import PLAUSIBLE_LOGIT, STRONG_LOGIT, confidence, rerank_hits


def hit(row: int, score: float, floor: bool) -> tuple[int, float, dict[str, float]]:
    return row, score, {"floor": float(floor)}


def test_files_missing_from_a_folder_are_named(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"x")
    with pytest.raises(ModelUnavailable, match="tokenizer.json is missing"):
        reranker_files(tmp_path)


def test_rerank_orders_the_read_candidates_by_logit_and_keeps_the_rest_after():
    ranked = [hit(0, 0.9, True), hit(1, 0.8, True), hit(2, 0.7, True), hit(3, 0.6, True)]
    logits = {0: -1.0, 1: 3.0, 2: 1.0}
    out = rerank_hits(ranked, lambda rows: np.array([logits[r] for r in rows]), pairs=3)
    assert [r for r, _, _ in out] == [1, 2, 0, 3]
    # The first stage's order and the logit stay readable (explain), the scores are untouched.
    assert [p["first_rank"] for _, _, p in out[:3]] == [1.0, 2.0, 0.0]
    assert [p["rerank"] for _, _, p in out[:3]] == [3.0, 1.0, -1.0]
    assert [s for _, s, _ in out] == [0.8, 0.7, 0.9, 0.6]
    assert "rerank" not in out[3][2]


def test_rerank_drops_what_neither_the_floor_nor_the_cross_encoder_finds_plausible():
    ranked = [hit(0, 0.9, False), hit(1, 0.8, False), hit(2, 0.7, False), hit(3, 0.6, False)]
    logits = {0: PLAUSIBLE_LOGIT - 0.5, 1: PLAUSIBLE_LOGIT, 2: PLAUSIBLE_LOGIT - 3}
    out = rerank_hits(ranked, lambda rows: np.array([logits[r] for r in rows]), pairs=3)
    # Row 3 was not read and the floor dropped it: it is not returned either.
    assert [r for r, _, _ in out] == [1]


def test_rerank_reads_only_the_first_pairs():
    seen = []

    def score(rows):
        seen.extend(rows)
        return np.zeros(len(rows))

    rerank_hits([hit(i, 1.0 - i / 100, True) for i in range(30)], score, pairs=12)
    assert seen == list(range(12))


def test_confidence_by_logit_with_the_second_stage_and_by_floor_without():
    assert confidence({"floor": 0.0, "rerank": STRONG_LOGIT}) == "strong"
    assert confidence({"floor": 1.0, "rerank": STRONG_LOGIT - 0.01}) == "weak"
    assert confidence({"floor": 1.0}) == "strong"
    assert confidence({"floor": 0.0}) == "weak"
