"""The second stage's pure parts: locating the model files, the reordering, the confidence rule."""

from __future__ import annotations

import numpy as np
import pytest

from engram.core.errors import ModelUnavailable
from engram.models.reranker import reranker_files
from engram.search.ranking import STRONG_COSINE, STRONG_COVERAGE, STRONG_MEANING, confidence, rerank_hits


def hit(row: int, score: float, floor: bool) -> tuple[int, float, dict[str, float]]:
    return row, score, {"floor": float(floor)}


def parts(floor=True, coverage=0.0, cosine=0.0, background=0.1, meaning=0.0) -> dict[str, float]:
    return {"floor": float(floor), "coverage": coverage, "cosine": cosine, "background": background, "meaning": meaning}


def test_files_missing_from_a_folder_are_named(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"x")
    with pytest.raises(ModelUnavailable, match=r"tokenizer\.json is missing"):
        reranker_files(tmp_path)


def test_rerank_orders_the_read_candidates_by_logit_and_keeps_the_rest_after():
    ranked = [hit(0, 0.9, True), hit(1, 0.8, True), hit(2, 0.7, True), hit(3, 0.6, True)]
    logits = {0: -1.0, 1: 3.0, 2: 1.0}
    out = rerank_hits(ranked, lambda rows: np.array([logits[r] for r in rows]), pairs=3, weight=10.0)
    assert [r for r, _, _ in out] == [1, 2, 0, 3]
    # The first stage's order and the logit stay readable (explain), the scores are untouched.
    assert [p["first_rank"] for _, _, p in out[:3]] == [1.0, 2.0, 0.0]
    assert [p["rerank"] for _, _, p in out[:3]] == [3.0, 1.0, -1.0]
    assert [s for _, s, _ in out] == [0.8, 0.7, 0.9, 0.6]
    assert "rerank" not in out[3][2]


def test_a_small_weight_only_breaks_near_ties_of_the_first_stage():
    ranked = [hit(0, 1.0, True), hit(1, 0.99, True), hit(2, 0.5, True)]
    logits = {0: -10.0, 1: 5.0, 2: 9.0}
    out = rerank_hits(ranked, lambda rows: np.array([logits[r] for r in rows]), pairs=3, weight=0.1)
    assert [r for r, _, _ in out] == [1, 0, 2]


def test_rerank_reads_only_the_first_pairs():
    seen = []

    def score(rows):
        seen.extend(rows)
        return np.zeros(len(rows))

    rerank_hits([hit(i, 1.0 - i / 100, True) for i in range(30)], score, pairs=12, weight=0.5)
    assert seen == list(range(12))


def test_confidence_strong_by_words_or_by_a_clear_meaning_margin():
    assert confidence(parts(coverage=STRONG_COVERAGE))[0] == "strong"
    assert confidence(parts(coverage=STRONG_COVERAGE - 0.01))[0] == "weak"
    by_meaning = parts(cosine=0.1 + STRONG_COSINE, meaning=STRONG_MEANING)
    label, why = confidence(by_meaning)
    assert label == "strong" and "meaning" in why
    # A near-topic query: close to one memory, but not by a margin over unrelated text.
    assert confidence(parts(cosine=0.9, meaning=STRONG_MEANING - 0.01))[0] == "weak"
    # The query is clear, this hit is not (another memory is the answer).
    assert confidence(parts(cosine=0.1 + STRONG_COSINE - 0.01, meaning=0.9))[0] == "weak"
    # Below the floor (a candidate the reranker let in) is never strong.
    assert confidence(parts(floor=False, coverage=1.0))[0] == "weak"


def test_the_calibrated_thresholds_are_the_ones_docs_ranking_states():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "ranking.md").read_text(encoding="utf-8")
    for name, value in (
        ("STRONG_COVERAGE", STRONG_COVERAGE),
        ("STRONG_MEANING", STRONG_MEANING),
        ("STRONG_COSINE", STRONG_COSINE),
    ):
        assert f"`{name}` ({value:g}" in doc, f"docs/ranking.md does not give {name} = {value:g}"


def test_late_hits_reorders_by_standardised_maxsim_and_keeps_hits_and_scores():
    from engram.search.ranking import late_hits

    ranked = [hit(0, 1.0, True), hit(1, 0.98, True), hit(2, 0.5, True), hit(3, 0.4, True)]
    sims = {0: 0.5, 1: 0.9, 2: 0.7}
    out = late_hits(ranked, lambda rows: np.array([sims[r] for r in rows]), candidates=3, weight=0.1)
    # z = -1.22, 1.22, 0: the near tie of the first two flips, the clear gap to the third holds.
    assert [r for r, _, _ in out] == [1, 0, 2, 3]
    assert [s for _, s, _ in out] == [0.98, 1.0, 0.5, 0.4]
    assert [p["first_rank"] for _, _, p in out[:3]] == [1.0, 0.0, 2.0] and "late" not in out[3][2]


def test_late_hits_reads_only_the_rows_it_is_told_and_needs_two():
    from engram.search.ranking import late_hits

    seen = []

    def score(rows):
        seen.append(list(rows))
        return np.array([0.9 if r == 2 else 0.1 for r in rows])

    ranked = [hit(0, 1.0, True), hit(1, 0.99, True), hit(2, 0.95, True)]
    out = late_hits(ranked, score, candidates=3, weight=1.0, reads=lambda r: r != 0)
    assert seen == [[1, 2]] and [r for r, _, _ in out] == [2, 0, 1]  # row 0 counts as average
    assert "late" not in out[1][2]
    assert late_hits(ranked, score, candidates=3, weight=1.0, reads=lambda r: r == 1) == ranked
    assert seen == [[1, 2]]  # one row to read: nothing scored, nothing moved
