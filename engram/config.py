"""Settings: every ENGRAM_* variable is read here and nowhere else."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def _float(env: dict, name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def _int(env: dict, name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None


def _bool(env: dict, name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={env.get(name)!r} is not 1/true/yes/on or 0/false/no/off")


def onnx_from_env(env: dict[str, str] | None = None) -> bool:
    """ENGRAM_ONNX: embed through ONNX Runtime when the model allows it (default on)."""
    return _bool(dict(os.environ if env is None else env), "ENGRAM_ONNX", Settings.onnx)


@dataclass(frozen=True)
class Settings:
    """Tunable behaviour. Defaults are the documented ones; see README."""

    home: Path = field(default_factory=lambda: Path.home() / ".engram")
    model: str = DEFAULT_MODEL
    reinforce_threshold: float = 0.85
    dedup_threshold: float = 0.65
    w_bm25: float = 0.5
    w_vector: float = 0.5
    graph_depth: int = 0
    graph_bonus: float = 0.1
    # Ranking: cosine × (floor + (1 − floor) × strength), so decay demotes but never buries.
    decay_floor: float = 0.8
    # Search a turn of a conversation (a memory stored with `conversation`) together with the
    # turns written just before it: how many, how much their vectors weigh in, and how much
    # their words count in BM25 (0.4: LoCoMo, see benchmarks/RESULTS.md, issue 13).
    context_window: int = 2
    context_weight: float = 0.5
    context_terms: float = 0.4
    # BM25: term-frequency saturation and length normalisation (b 0.3: memories are short and
    # a long one is not less relevant for being long).
    bm25_k1: float = 1.2
    bm25_b: float = 0.3
    # Cue bonuses added to a candidate's score (see retrieve): written on a date the query
    # names; opening label ("Name: …") named in the query; mentions a time when asked when.
    date_bonus: float = 0.1
    speaker_bonus: float = 0.15
    when_bonus: float = 0.1
    # Relevance floor (see retrieve): a query gets hits only when its best cosine beats the
    # query's background cosine plus how far it stands out from the store's 5th nearest memory
    # reaches relevance_cosine, or a memory holds relevance_coverage of its IDF mass (or three of
    # its words).
    relevance_cosine: float = 0.24
    relevance_coverage: float = 0.55
    # get_context packs only hits scoring at least this share of the best hit's score: a block
    # for a prompt is no place for what merely came along (see Api.get_context).
    context_min_share: float = 0.5
    edge_threshold: float = 0.40
    max_edges: int = 5
    consolidate_threshold: float = 0.70
    prune_threshold: float = 0.05
    maintenance_hours: float = 12.0
    consolidated_retention_days: float = 30.0
    heartbeat_timeout_s: float = 300.0
    # The daemon exits after this many seconds with no client connected (0: never). A restart
    # costs about a second once the model's ONNX graph is checked, while an idle daemon holds
    # some 400 MB; a quarter of an hour spans the pauses of a working session.
    idle_exit_s: float = 900.0
    token: str | None = None
    redact_patterns: tuple[str, ...] = ()
    chunk_size: int = 1000
    chunk_overlap: int = 100
    max_content_chars: int = 100_000
    torch_threads: int = 1
    onnx: bool = True
    user_id: str = "default"

    @property
    def db_path(self) -> Path:
        return self.home / "memories.duckdb"

    @property
    def socket_path(self) -> Path:
        return self.home / "engram.sock"

    @property
    def model_cache(self) -> Path:
        return self.home / "model_cache"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "Settings":
        env = dict(os.environ if env is None else env)
        d = cls()
        home = env.get("ENGRAM_HOME")
        patterns = env.get("ENGRAM_REDACT_PATTERNS", "")
        s = cls(
            home=Path(home).expanduser() if home else d.home,
            model=env.get("ENGRAM_MODEL") or d.model,
            reinforce_threshold=_float(env, "ENGRAM_REINFORCE_THRESHOLD", d.reinforce_threshold),
            dedup_threshold=_float(env, "ENGRAM_DEDUP_THRESHOLD", d.dedup_threshold),
            w_bm25=_float(env, "ENGRAM_W_BM25", d.w_bm25),
            w_vector=_float(env, "ENGRAM_W_VECTOR", d.w_vector),
            graph_depth=_int(env, "ENGRAM_GRAPH_DEPTH", d.graph_depth),
            graph_bonus=_float(env, "ENGRAM_GRAPH_BONUS", d.graph_bonus),
            decay_floor=_float(env, "ENGRAM_DECAY_FLOOR", d.decay_floor),
            context_window=_int(env, "ENGRAM_CONTEXT_WINDOW", d.context_window),
            context_weight=_float(env, "ENGRAM_CONTEXT_WEIGHT", d.context_weight),
            context_terms=_float(env, "ENGRAM_CONTEXT_TERMS", d.context_terms),
            bm25_k1=_float(env, "ENGRAM_BM25_K1", d.bm25_k1),
            bm25_b=_float(env, "ENGRAM_BM25_B", d.bm25_b),
            date_bonus=_float(env, "ENGRAM_DATE_BONUS", d.date_bonus),
            speaker_bonus=_float(env, "ENGRAM_SPEAKER_BONUS", d.speaker_bonus),
            when_bonus=_float(env, "ENGRAM_WHEN_BONUS", d.when_bonus),
            relevance_cosine=_float(env, "ENGRAM_RELEVANCE_COSINE", d.relevance_cosine),
            relevance_coverage=_float(env, "ENGRAM_RELEVANCE_COVERAGE", d.relevance_coverage),
            context_min_share=_float(env, "ENGRAM_CONTEXT_MIN_SHARE", d.context_min_share),
            edge_threshold=_float(env, "ENGRAM_EDGE_THRESHOLD", d.edge_threshold),
            max_edges=_int(env, "ENGRAM_MAX_EDGES", d.max_edges),
            consolidate_threshold=_float(env, "ENGRAM_CONSOLIDATE_THRESHOLD", d.consolidate_threshold),
            prune_threshold=_float(env, "ENGRAM_PRUNE_THRESHOLD", d.prune_threshold),
            maintenance_hours=_float(env, "ENGRAM_MAINTENANCE_HOURS", d.maintenance_hours),
            consolidated_retention_days=_float(
                env, "ENGRAM_CONSOLIDATED_RETENTION_DAYS", d.consolidated_retention_days
            ),
            heartbeat_timeout_s=_float(env, "ENGRAM_HEARTBEAT_TIMEOUT", d.heartbeat_timeout_s),
            idle_exit_s=_float(env, "ENGRAM_IDLE_EXIT", d.idle_exit_s),
            token=env.get("ENGRAM_TOKEN") or None,
            redact_patterns=tuple(p for p in patterns.split("\n") if p.strip()),
            chunk_size=_int(env, "ENGRAM_CHUNK_SIZE", d.chunk_size),
            chunk_overlap=_int(env, "ENGRAM_CHUNK_OVERLAP", d.chunk_overlap),
            max_content_chars=_int(env, "ENGRAM_MAX_CONTENT", d.max_content_chars),
            torch_threads=_int(env, "ENGRAM_TORCH_THREADS", d.torch_threads),
            onnx=_bool(env, "ENGRAM_ONNX", d.onnx),
            user_id=env.get("ENGRAM_USER") or d.user_id,
        )
        s = replace(s, **overrides) if overrides else s
        s.validate()
        return s

    def validate(self) -> None:
        for name in ("reinforce_threshold", "dedup_threshold", "edge_threshold",
                     "consolidate_threshold", "prune_threshold", "decay_floor"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"ENGRAM_{name.upper()}={v} must be between 0 and 1")
        if self.dedup_threshold > self.reinforce_threshold:
            raise ValueError("ENGRAM_DEDUP_THRESHOLD must not exceed ENGRAM_REINFORCE_THRESHOLD")
        if self.w_bm25 < 0 or self.w_vector < 0:
            raise ValueError("ENGRAM_W_BM25 and ENGRAM_W_VECTOR must not be negative")
        if self.context_window < 0 or self.context_weight < 0 or self.context_terms < 0:
            raise ValueError("ENGRAM_CONTEXT_WINDOW, _WEIGHT and _TERMS must not be negative")
        if self.bm25_k1 < 0 or not 0.0 <= self.bm25_b <= 1.0:
            raise ValueError("ENGRAM_BM25_K1 must not be negative and ENGRAM_BM25_B must be between 0 and 1")
        if self.date_bonus < 0 or self.speaker_bonus < 0 or self.when_bonus < 0:
            raise ValueError("ENGRAM_DATE_BONUS, ENGRAM_SPEAKER_BONUS and ENGRAM_WHEN_BONUS must not be negative")
        if not -1.0 <= self.relevance_cosine <= 1.0 or not 0.0 <= self.relevance_coverage <= 1.0:
            raise ValueError("ENGRAM_RELEVANCE_COSINE must be between -1 and 1 and "
                             "ENGRAM_RELEVANCE_COVERAGE between 0 and 1")
        if not 0.0 <= self.context_min_share <= 1.0:
            raise ValueError("ENGRAM_CONTEXT_MIN_SHARE must be between 0 and 1")
        if self.graph_depth < 0 or self.max_edges < 0:
            raise ValueError("ENGRAM_GRAPH_DEPTH and ENGRAM_MAX_EDGES must not be negative")
        if self.maintenance_hours <= 0:
            raise ValueError("ENGRAM_MAINTENANCE_HOURS must be positive")
        if not self.idle_exit_s >= 0:  # also refuses nan
            raise ValueError("ENGRAM_IDLE_EXIT must be a number of seconds, 0 or more (0: never exit)")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError("ENGRAM_CHUNK_OVERLAP must be smaller than ENGRAM_CHUNK_SIZE")

