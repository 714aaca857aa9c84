"""The engine benchmark scripts run, end to end with the real model, at a tiny size."""

import pytest

from benchmarks import engine_bench
from benchmarks.engine_bench import sentence
from benchmarks.experiments import statement_profile, vector_search_bench
from engram import Engram
from engram.search import memory_index as index_mod


@pytest.mark.model  # engine_bench loads the real model itself
def test_engine_bench_reports_each_size(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path))
    out = engine_bench.main(["--sizes", "40,80", "--samples", "3", "--out", str(tmp_path / "r.json")])
    assert [r["memories"] >= size for r, size in zip(out["rows"], (40, 80))] == [True, True]
    assert all(r["store_p50_ms"] > 0 and r["recall_p50_ms"] > 0 and r["ingest_per_s"] > 0 for r in out["rows"])
    assert (tmp_path / "r.json").exists()


@pytest.mark.model
def test_vector_search_bench_and_statement_profile_on_a_store(tmp_path, monkeypatch, real_embedder, settings):
    import random

    rng = random.Random(1)
    path = tmp_path / "s.duckdb"
    eng = Engram(path, settings=settings, embedder=real_embedder)
    eng.store_many([dict(content=sentence(rng)) for _ in range(300)])
    eng.close()
    monkeypatch.setenv("ENGRAM_HOME", str(settings.home))
    monkeypatch.setattr(index_mod, "BOUNDED_MIN_ROWS", 100)
    out = vector_search_bench.main([str(path), "--queries", "20", "--k", "10"])
    assert out["bounded"] and out["same_top_k"] == 20
    prof = statement_profile.main([str(path), "--ops", "4"])
    assert sum(prof["actions"].values()) == 4 and prof["calls"].get("COMMIT", 0) >= 1


@pytest.mark.model
def test_continuity_bench_reports_each_size():
    from benchmarks import continuity_bench

    out = continuity_bench.main(["--sizes", "0,6", "--samples", "2", "--background", "5"])
    assert [r["after_handoff"] for r in out["rows"]] == [0, 6]
    assert all(r["recall_p50_ms"] > 0 and r["get_context_p50_ms"] > 0 and r["cold_recall_ms"] > 0 for r in out["rows"])
    assert out["rows"][0]["recall_p50_ratio"] == 1.0


def test_open_close_bench_times_this_tree_and_another(tmp_path):
    import shutil
    from pathlib import Path

    from benchmarks.experiments import open_close

    here = Path(open_close.__file__).resolve().parents[2]
    shutil.copytree(here / "engram", tmp_path / "engram", ignore=shutil.ignore_patterns("__pycache__"))
    out = open_close.main(["--samples", "2", "--rounds", "2", "--compare", str(tmp_path)])
    assert out[str(here)]["n"] == out[str(tmp_path)]["n"] == 4
    assert out[str(here)]["median_ms"] > 0 and out[str(tmp_path)]["ratio_to_this_tree"] > 0


def test_maintenance_quiet_bench_times_runs_that_find_nothing_to_do():
    from benchmarks import maintenance_quiet

    out = maintenance_quiet.run(memories=300, runs=2)
    assert out["memories"] == 300 and len(out["quiet_run_s"]) == 2
    assert (out["pruned"], out["consolidated"], out["reindexed"]) == (0, 0, False)
