"""Settings: one declaration per setting; from_env, validate and Weights derive from it."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from engram import Engram
from engram.core.settings import SETTINGS, Settings
from engram.search.ranking import Weights

# The variables as published before the settings were declared once: none may change name.
PUBLISHED = {
    "home": "ENGRAM_HOME",
    "database_url": "ENGRAM_DATABASE_URL",
    "model": "ENGRAM_MODEL",
    "reinforce_threshold": "ENGRAM_REINFORCE_THRESHOLD",
    "dedup_threshold": "ENGRAM_DEDUP_THRESHOLD",
    "w_bm25": "ENGRAM_W_BM25",
    "w_vector": "ENGRAM_W_VECTOR",
    "graph_depth": "ENGRAM_GRAPH_DEPTH",
    "graph_bonus": "ENGRAM_GRAPH_BONUS",
    "decay_floor": "ENGRAM_DECAY_FLOOR",
    "context_window": "ENGRAM_CONTEXT_WINDOW",
    "context_weight": "ENGRAM_CONTEXT_WEIGHT",
    "context_terms": "ENGRAM_CONTEXT_TERMS",
    "turn_lexical_floor": "ENGRAM_TURN_LEXICAL_FLOOR",
    "bm25_k1": "ENGRAM_BM25_K1",
    "bm25_b": "ENGRAM_BM25_B",
    "date_bonus": "ENGRAM_DATE_BONUS",
    "speaker_bonus": "ENGRAM_SPEAKER_BONUS",
    "when_bonus": "ENGRAM_WHEN_BONUS",
    "relevance_cosine": "ENGRAM_RELEVANCE_COSINE",
    "relevance_coverage": "ENGRAM_RELEVANCE_COVERAGE",
    "rerank": "ENGRAM_RERANK",
    "rerank_pairs": "ENGRAM_RERANK_PAIRS",
    "rerank_weight": "ENGRAM_RERANK_WEIGHT",
    "rerank_threads": "ENGRAM_RERANK_THREADS",
    "late_interaction": "ENGRAM_LATE_INTERACTION",
    "late_candidates": "ENGRAM_LATE_CANDIDATES",
    "late_weight": "ENGRAM_LATE_WEIGHT",
    "context_min_share": "ENGRAM_CONTEXT_MIN_SHARE",
    "edge_threshold": "ENGRAM_EDGE_THRESHOLD",
    "max_edges": "ENGRAM_MAX_EDGES",
    "consolidate_threshold": "ENGRAM_CONSOLIDATE_THRESHOLD",
    "gists": "ENGRAM_GISTS",
    "gist_threshold": "ENGRAM_GIST_THRESHOLD",
    "gist_window_days": "ENGRAM_GIST_WINDOW_DAYS",
    "gist_command": "ENGRAM_GIST_COMMAND",
    "tier_working": "ENGRAM_TIER_WORKING",
    "tier_episodic": "ENGRAM_TIER_EPISODIC",
    "tier_semantic": "ENGRAM_TIER_SEMANTIC",
    "tier_procedural": "ENGRAM_TIER_PROCEDURAL",
    "ttl_days": "ENGRAM_TTL_DAYS",
    "prune_threshold": "ENGRAM_PRUNE_THRESHOLD",
    "maintenance_hours": "ENGRAM_MAINTENANCE_HOURS",
    "backup_keep": "ENGRAM_BACKUP_KEEP",
    "consolidated_retention_days": "ENGRAM_CONSOLIDATED_RETENTION_DAYS",
    "heartbeat_timeout_s": "ENGRAM_HEARTBEAT_TIMEOUT",
    "claim_timeout_s": "ENGRAM_CLAIM_TIMEOUT",
    "idle_exit_s": "ENGRAM_IDLE_EXIT",
    "token": "ENGRAM_TOKEN",
    "redact_patterns": "ENGRAM_REDACT_PATTERNS",
    "redact_allow": "ENGRAM_REDACT_ALLOW",
    "chunk_size": "ENGRAM_CHUNK_SIZE",
    "chunk_overlap": "ENGRAM_CHUNK_OVERLAP",
    "max_content_chars": "ENGRAM_MAX_CONTENT",
    "torch_threads": "ENGRAM_TORCH_THREADS",
    "onnx": "ENGRAM_ONNX",
    "user_id": "ENGRAM_USER",
    "hook_start": "ENGRAM_HOOK_START",
    "hook_start_tokens": "ENGRAM_HOOK_START_TOKENS",
    "hook_prompt": "ENGRAM_HOOK_PROMPT",
    "hook_prompt_tokens": "ENGRAM_HOOK_PROMPT_TOKENS",
    "hook_checkpoint": "ENGRAM_HOOK_CHECKPOINT",
    "hook_exclude": "ENGRAM_HOOK_EXCLUDE",
    "hook_timeout_s": "ENGRAM_HOOK_TIMEOUT",
    "model_cache_dir": "ENGRAM_MODEL_CACHE",
    "capture_fixes": "ENGRAM_CAPTURE_FIXES",
    "capture_episodes": "ENGRAM_CAPTURE_EPISODES",
    "capture_conventions": "ENGRAM_CAPTURE_CONVENTIONS",
    "capture_off_projects": "ENGRAM_CAPTURE_OFF_PROJECTS",
    "capture_episode_budget": "ENGRAM_CAPTURE_EPISODE_BUDGET",
    "share_push": "ENGRAM_SHARE_PUSH",
}
# The defaults as published (README): a declaration may not change one by accident.
DEFAULTS = {
    "database_url": "",
    "model": "all-MiniLM-L6-v2",
    "reinforce_threshold": 0.85,
    "dedup_threshold": 0.65,
    "w_bm25": 0.5,
    "w_vector": 0.5,
    "graph_depth": 1,
    "graph_bonus": 0.1,
    "decay_floor": 0.8,
    "context_window": 2,
    "context_weight": 0.5,
    "context_terms": 0.4,
    "bm25_k1": 1.2,
    "bm25_b": 0.3,
    "date_bonus": 0.1,
    "speaker_bonus": 0.15,
    "when_bonus": 0.1,
    "relevance_cosine": 0.24,
    "relevance_coverage": 0.55,
    "rerank": False,
    "rerank_pairs": 12,
    "rerank_weight": 0.5,
    "rerank_threads": 2,
    "late_interaction": True,
    "late_candidates": 40,
    "late_weight": 0.1,
    "context_min_share": 0.5,
    "edge_threshold": 0.40,
    "max_edges": 5,
    "consolidate_threshold": 0.70,
    "tier_working": 0.4,
    "tier_episodic": 1.0,
    "tier_semantic": 2.5,
    "tier_procedural": 8.0,
    "ttl_days": (),
    "prune_threshold": 0.05,
    "maintenance_hours": 12.0,
    "backup_keep": 7,
    "consolidated_retention_days": 30.0,
    "heartbeat_timeout_s": 300.0,
    "claim_timeout_s": 120.0,
    "idle_exit_s": 900.0,
    "token": None,
    "redact_patterns": (),
    "chunk_size": 1000,
    "chunk_overlap": 100,
    "max_content_chars": 100_000,
    "torch_threads": 1,
    "onnx": True,
    "user_id": "default",
    "hook_start": True,
    "hook_start_tokens": 1500,
    "hook_prompt": True,
    "hook_prompt_tokens": 300,
    "hook_checkpoint": True,
    "hook_timeout_s": 8.0,
    "model_cache_dir": "",
    "capture_fixes": True,
    "capture_episodes": True,
    "capture_conventions": True,
    "capture_off_projects": (),
    "capture_episode_budget": 2000,
    "share_push": False,
}


def test_every_setting_keeps_its_published_variable():
    assert {s.name: s.env for s in SETTINGS} == PUBLISHED
    assert [s.name for s in SETTINGS] == [f.name for f in fields(Settings)]


def test_every_default_is_the_published_one():
    s = Settings.from_env({})
    assert {name: getattr(s, name) for name in DEFAULTS} == DEFAULTS
    assert s.home == Path.home() / ".engram"
    assert s == Settings()


def _other_value(s) -> tuple[str, object]:
    """A valid value for setting `s` other than its default: (the variable's text, the value)."""
    if s.type is bool:
        return ("0", False) if s.default else ("1", True)
    if s.type is int:
        return str(s.default + 1), s.default + 1
    if s.type is float:
        v = round(s.default - 0.01 if s.le is not None and s.default + 0.01 > s.le else s.default + 0.01, 6)
        return repr(v), v
    if s.type is Path:
        return "~/elsewhere", Path.home() / "elsewhere"
    if s.name == "ttl_days":  # one `name=days` a line
        return "working=30\n\n  \nfailure=90", ("working=30", "failure=90")
    if s.type == tuple[str, ...]:
        return "secret-\\d+\n\n  \nkey=\\w+", ("secret-\\d+", "key=\\w+")
    if s.name == "database_url":  # only a PostgreSQL URL is valid
        return "postgresql://db.example/engram", "postgresql://db.example/engram"
    return "some-value", "some-value"


@pytest.mark.parametrize("s", SETTINGS, ids=[s.env for s in SETTINGS])
def test_each_variable_sets_its_own_field_and_no_other(s):
    raw, value = _other_value(s)
    got = Settings.from_env({s.env: raw})
    assert getattr(got, s.name) == value
    assert replace(got, **{s.name: getattr(Settings(), s.name)}) == Settings()


def test_an_empty_variable_means_the_default():
    assert Settings.from_env({s.env: "" for s in SETTINGS}) == Settings()
    assert Settings.from_env({"ENGRAM_ONNX": "  "}).onnx is True


def test_overrides_win_over_the_environment_and_are_validated():
    assert Settings.from_env({"ENGRAM_W_BM25": "0.9"}, w_bm25=0.2).w_bm25 == 0.2
    with pytest.raises(ValueError, match="ENGRAM_W_BM25=-1 must not be negative"):
        Settings.from_env({}, w_bm25=-1)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ENGRAM_W_BM25": "lots"}, "ENGRAM_W_BM25='lots' is not a number"),
        ({"ENGRAM_GRAPH_DEPTH": "two"}, "ENGRAM_GRAPH_DEPTH='two' is not a whole number"),
        ({"ENGRAM_ONNX": "maybe"}, "ENGRAM_ONNX='maybe' is not 1/true/yes/on or 0/false/no/off"),
        ({"ENGRAM_DECAY_FLOOR": "1.5"}, "ENGRAM_DECAY_FLOOR=1.5 must be between 0 and 1"),
        ({"ENGRAM_RELEVANCE_COSINE": "-2"}, "ENGRAM_RELEVANCE_COSINE=-2.0 must be between -1 and 1"),
        ({"ENGRAM_MAX_EDGES": "-1"}, "ENGRAM_MAX_EDGES=-1 must not be negative"),
        ({"ENGRAM_MAINTENANCE_HOURS": "0"}, "ENGRAM_MAINTENANCE_HOURS=0.0 must be positive"),
        ({"ENGRAM_IDLE_EXIT": "nan"}, "ENGRAM_IDLE_EXIT=nan must not be negative"),
        ({"ENGRAM_DEDUP_THRESHOLD": "0.9"}, "ENGRAM_DEDUP_THRESHOLD must not exceed ENGRAM_REINFORCE_THRESHOLD"),
        ({"ENGRAM_CHUNK_OVERLAP": "1000"}, "ENGRAM_CHUNK_OVERLAP must be smaller than ENGRAM_CHUNK_SIZE"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(env, message):
    with pytest.raises(ValueError) as e:
        Settings.from_env(env)
    assert str(e.value) == message


def test_weights_take_each_setting_by_name():
    # A distinct value per field: a weight read from the wrong setting shows.
    shared = [f.name for f in fields(Weights) if f.name in {s.name for s in SETTINGS}]
    assert {
        "w_bm25",
        "w_vector",
        "graph_depth",
        "graph_bonus",
        "decay_floor",
        "bm25_k1",
        "bm25_b",
        "date_bonus",
        "speaker_bonus",
        "when_bonus",
        "relevance_cosine",
        "relevance_coverage",
    } <= set(shared)
    s = replace(Settings(), **{name: 10 + i for i, name in enumerate(shared)})
    w = Weights.from_settings(s)
    assert {name: getattr(w, name) for name in shared} == {name: 10 + i for i, name in enumerate(shared)}
    others = [f for f in fields(Weights) if f.name not in shared]
    assert others and all(getattr(w, f.name) == f.default for f in others)


def test_the_engine_ranks_with_the_weights_of_its_settings(settings, fake, clock):
    s = replace(settings, w_bm25=0.3, w_vector=0.7, bm25_b=0.75, speaker_bonus=0.2)
    eng = Engram(":memory:", settings=s, embedder=fake, clock=clock)
    try:
        assert eng.weights == Weights.from_settings(s)
        assert (eng.weights.w_bm25, eng.weights.w_vector, eng.weights.bm25_b) == (0.3, 0.7, 0.75)
    finally:
        eng.close()


def test_the_model_cache_is_the_machines_unless_engram_model_cache_names_one(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    # One per machine (issue 46): a new home reuses the graph an earlier one exported.
    assert Settings.from_env({"ENGRAM_HOME": str(home)}).model_cache == tmp_path / "xdg" / "engram"
    (home / "model_cache").mkdir(parents=True)  # made by an older version: it may hold a downloaded model
    assert Settings.from_env({"ENGRAM_HOME": str(home)}).model_cache == home / "model_cache"
    shared = Settings.from_env({"ENGRAM_HOME": str(home), "ENGRAM_MODEL_CACHE": "~/shared-cache"})
    assert shared.model_cache == Path("~/shared-cache").expanduser() and shared.home == home
