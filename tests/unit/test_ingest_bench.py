"""The ingest benchmark (benchmarks.ingest_bench) compares what it says it compares: its pool
grows across seeds with ids kept apart and only questions whose evidence is stored, and its
paths store the same memories and recall the same top 10 (here with the fake embedder)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks import ingest_bench
from benchmarks.locomo.run import default_data_path

DATA = default_data_path()
needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"LoCoMo data not found at {DATA}")


@needs_data
def test_the_pool_grows_across_seeds_and_keeps_only_questions_it_can_answer():
    doc = ingest_bench.pool(DATA, 2500)  # one seed's set holds about 2,000 turns
    turns = [t for s in doc["sessions"] for t in s["turns"]]
    assert 2500 <= len(turns) < 2520
    assert {s["id"].split("-")[0] for s in doc["sessions"]} == {"s47", "s48"}
    assert len({t["id"] for t in turns}) == len(turns)
    ids = {t["id"] for t in turns}
    assert doc["questions"] and all(q["evidence"] and set(q["evidence"]) <= ids for q in doc["questions"])
    assert ingest_bench.pool(DATA, 2500) == doc


def test_every_path_stores_the_same_and_recalls_the_same(settings, fake):
    doc = {
        "sessions": [
            {
                "id": f"s{i}",
                "date": f"2024-0{i + 1}-01T10:00:00+00:00",
                "turns": [
                    {"id": f"s{i}:t0", "role": "user", "content": f"We adopted a gecko called Velmar{i}."},
                    {"id": f"s{i}:t1", "role": "assistant", "content": "Geckos like warm tanks. " * (100 + i)},
                    {"id": f"s{i}:t2", "role": "user", "content": "Thanks, that helps."},
                    {"id": f"s{i}:t3", "role": "user", "content": "Thanks, that helps."},  # said again
                ],
            }
            for i in range(3)
        ],
        "questions": [{"question": "What did we call the lizard?", "evidence": ["s1:t0"], "half": "report"}],
    }
    settings = replace(settings, late_interaction=True, database_url=None)
    rows, tops, mems = [], [], []
    for path in ingest_bench.PATHS:
        eng, row, before = ingest_bench.run_path(path, doc, settings, fake, batch_sessions=2, ask_before_fill=True)
        try:
            mems.append(ingest_bench.stored(eng))
            tops.append(ingest_bench.ask(eng, doc))
            assert before is not None and "s1:t0" in before[0]  # found before the fill too
            # The long turns' later chunks (a turn of 2,400-2,450 characters: 3 chunks) are embedded by the fill.
            assert row["embedded_by_fill"] == (0 if path == "one" else 2 * 3)
            assert row["filled"] == row["memories"] - row["token_vectors_before_fill"]
            assert len(eng.indexes.p.store_db.token_vectors()) == row["memories"]  # every turn filled
        finally:
            eng.close()
        rows.append(row)
    assert [r["actions"] for r in rows] == [{"new": 9, "reinforce": 3}] * 3
    assert mems[0] == mems[1] == mems[2] and tops[0] == tops[1] == tops[2]
    assert rows[0]["memories"] == 3 + 3 * 3 + 3  # each reply cut into 3 chunks
