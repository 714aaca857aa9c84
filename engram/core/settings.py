"""Settings: every ENGRAM_* variable is declared and read here and nowhere else.

Each setting is declared once, as a field of `Settings` made with `setting(...)`: its type (the
annotation), default, bounds and description. The variable's name derives from the field
(ENGRAM_<FIELD>; names published earlier, and ENGRAM_HOOK_TIMEOUT beside
ENGRAM_HEARTBEAT_TIMEOUT, are declared as they are), and
`Settings.from_env`, `Settings.validate` and the README check (tests/unit/test_docs.py) all read the
declarations in `SETTINGS`.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from engram.core.types import MEMORY_TIERS, MEMORY_TYPES

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The HTTP API's default address (engram serve --http, the daemon, the setup hints).
DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8765


@dataclass(frozen=True)
class Setting:
    """One setting's declaration. `name`, `env`, `type` and `default` are filled in from the field."""

    help: str
    ge: float | None = None  # bounds, checked by Settings.validate
    gt: float | None = None
    le: float | None = None
    # The variable's name when it is not ENGRAM_<FIELD>: names published before the fields got
    # their units (idle_exit_s is ENGRAM_IDLE_EXIT), kept so no existing configuration breaks.
    env_name: str | None = None
    shown: str | None = None  # the default as the README shows it, when it is not the value itself
    name: str = ""
    env: str = ""
    type: Any = None
    default: Any = None

    def parse(self, raw: str | None) -> Any:
        """The value of the variable's text `raw` (None or "": the default); ValueError names it."""
        if raw is None or raw == "":
            return self.default
        return _PARSERS[self.type](self, raw)

    def check(self, value: Any) -> None:
        """Raise ValueError naming the variable when `value` is outside the declared bounds.

        Every comparison with nan is false, so a bounded setting refuses nan too.
        """
        lo_ok = self.ge is None or value >= self.ge
        hi_ok = self.le is None or value <= self.le
        gt_ok = self.gt is None or value > self.gt
        if lo_ok and hi_ok and gt_ok:
            return
        if self.ge is not None and self.le is not None:
            rule = f"must be between {self.ge:g} and {self.le:g}"
        elif self.gt is not None:
            rule = "must be positive" if self.gt == 0 else f"must be more than {self.gt:g}"
        else:
            rule = "must not be negative" if self.ge == 0 else f"must be at least {self.ge:g}"
        raise ValueError(f"{self.env}={value!r} {rule}")

    def shown_default(self) -> str:
        """The default as a user writes it in the variable (the README's default column)."""
        if self.shown is not None:
            return self.shown
        if isinstance(self.default, bool):
            return "1" if self.default else "0"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


def setting(default: Any = None, help: str = "", *, factory: Any = None, **spec: Any) -> Any:
    """Declare a Settings field: its default (or `factory`), description and bounds."""
    meta = {"setting": Setting(help=help, **spec)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _float(s: Setting, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{s.env}={raw!r} is not a number") from None


def _int(s: Setting, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{s.env}={raw!r} is not a whole number") from None


def _bool(s: Setting, raw: str) -> bool:
    word = raw.strip().lower()
    if word == "":
        return s.default
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{s.env}={raw!r} is not 1/true/yes/on or 0/false/no/off")


_PARSERS: dict[Any, Any] = {
    float: _float,
    int: _int,
    bool: _bool,
    str: lambda s, raw: raw,
    str | None: lambda s, raw: raw,
    Path: lambda s, raw: Path(raw).expanduser(),
    tuple[str, ...]: lambda s, raw: tuple(p for p in raw.split("\n") if p.strip()),  # one per line
}


@dataclass(frozen=True)
class Settings:
    """Tunable behaviour. Defaults are the documented ones; see README."""

    home: Path = setting(help="data folder", factory=lambda: Path.home() / ".engram", shown="~/.engram")
    database_url: str = setting(
        "", "a PostgreSQL URL (postgresql://...) to use instead of the DuckDB file in ENGRAM_HOME", shown="none"
    )
    model: str = setting(DEFAULT_MODEL, "embedding model: a packaged name, a local folder or a Hub id")
    # One per machine by default: the model's ONNX graph is exported and checked once (about 15 s
    # here, torch loaded in a child process, 87 MB), not again at each new home's first start.
    model_cache_dir: str = setting(
        "",
        "folder for downloaded models and the checked ONNX graph, shared by every home on the machine",
        env_name="ENGRAM_MODEL_CACHE",
        shown="$XDG_CACHE_HOME/engram (~/.cache/engram); ENGRAM_HOME/model_cache if that folder exists",
    )
    reinforce_threshold: float = setting(
        0.85, "similarity at which a new memory reinforces an existing one", ge=0.0, le=1.0
    )
    dedup_threshold: float = setting(0.65, "similarity from which merge or replace is considered", ge=0.0, le=1.0)
    w_bm25: float = setting(0.5, "keyword weight in fusion", ge=0.0)
    w_vector: float = setting(0.5, "vector weight in fusion", ge=0.0)
    # Graph expansion (search/links.py): from the first hits, the turns said just before and after
    # them and the memories naming their rare words (benchmarks/RESULTS.md, issue 47).
    graph_depth: int = setting(1, "graph expansion hops from the first hits (0: off)", ge=0)
    graph_bonus: float = setting(0.1, "score added to a memory linked to a hit, times the link's strength")
    # Ranking: cosine × (floor + (1 − floor) × strength), so decay demotes but never buries.
    decay_floor: float = setting(0.8, "least decay weight of a memory in ranking", ge=0.0, le=1.0)
    # Search a turn of a conversation (a memory stored with `conversation`) together with the
    # turns written just before it: how many, how much their vectors weigh in, and how much
    # their words count in BM25 (0.4: LoCoMo, see benchmarks/HISTORY.md, issue 13).
    context_window: int = setting(2, "earlier turns of a conversation searched with a turn", ge=0)
    context_weight: float = setting(0.5, "how much those turns count in the vector", ge=0.0)
    context_terms: float = setting(0.4, "how much those turns count in BM25", ge=0.0)
    # A turn's BM25 weighs at least this much in hybrid, however little of the query's words any
    # memory holds (an independent memory's weighs by that coverage: search/ranking.py, "adapt").
    turn_lexical_floor: float = setting(0.75, "least weight of a turn's BM25 in hybrid", ge=0.0, le=1.0)
    # BM25: term-frequency saturation and length normalisation (b 0.3: memories are short and
    # a long one is not less relevant for being long).
    bm25_k1: float = setting(1.2, "BM25 term-frequency saturation", ge=0.0)
    bm25_b: float = setting(0.3, "BM25 length normalisation", ge=0.0, le=1.0)
    # Cue bonuses added to a candidate's score (see search/ranking.py): written on a date the query
    # names; opening label ("Name: …") named in the query; mentions a time when asked when.
    date_bonus: float = setting(0.1, "score added to a memory written on a date the query names", ge=0.0)
    speaker_bonus: float = setting(0.15, "score added to a memory whose opening label the query names", ge=0.0)
    when_bonus: float = setting(0.1, "score added, for a 'When…?' question, to a memory naming a time", ge=0.0)
    # Relevance floor (see search/ranking.py): a query gets hits only when its best cosine beats the
    # query's background cosine plus how far it stands out from the store's 5th nearest memory
    # reaches relevance_cosine, or a memory holds relevance_coverage of its IDF mass (or three of
    # its words).
    relevance_cosine: float = setting(
        0.24, "least (best − background) + (best − max(5th best, background)) for any hit by meaning", ge=-1.0, le=1.0
    )
    relevance_coverage: float = setting(0.55, "or least share of the query's IDF mass a memory holds", ge=0.0, le=1.0)
    # The second stage (ranking.rerank_hits): a cross-encoder reads the query with each of the
    # first stage's best rerank_pairs candidates and orders them by its score (benchmarks/HISTORY.md,
    # issue 27, for what it costs and gives).
    rerank: bool = setting(False, "reorder hybrid recall's first candidates with the cross-encoder (1: on)")
    rerank_pairs: int = setting(12, "candidates the cross-encoder reads per query", ge=1, le=100)
    rerank_weight: float = setting(
        0.5, "weight of the cross-encoder's sigmoid beside the first stage's score over the best", ge=0.0
    )
    rerank_threads: int = setting(2, "CPU threads for the cross-encoder and the late-interaction reader", ge=1)
    # The late-interaction stage (ranking.late_hits, models/late_interaction.py): MaxSim of the
    # query's token vectors against each of the first stage's best late_candidates memories' (kept
    # beside their embeddings), fused as score / best + late_weight × z(MaxSim) (benchmarks/HISTORY.md,
    # session 16, for the figures that chose the default and the weight).
    late_interaction: bool = setting(
        True,
        "reorder hybrid recall's first candidates that are turns of a "
        "conversation by late interaction (MaxSim over token vectors kept "
        "with each turn; 0: off)",
    )
    late_candidates: int = setting(40, "candidates the late-interaction stage reads per query", ge=1, le=200)
    late_weight: float = setting(
        0.1, "weight of the standardised MaxSim beside the first stage's score over the best", ge=0.0
    )
    # get_context packs only hits scoring at least this share of the best hit's score: a block
    # for a prompt is no place for what merely came along (see Api.get_context).
    context_min_share: float = setting(0.5, "least share of the best hit's score get_context packs", ge=0.0, le=1.0)
    edge_threshold: float = setting(0.40, "least similarity for an edge", ge=0.0, le=1.0)
    max_edges: int = setting(5, "edges per memory", ge=0)
    consolidate_threshold: float = setting(
        0.70, "similarity at which maintenance consolidates memories", ge=0.0, le=1.0
    )
    # Gists (docs/lifecycle.md#gists): maintenance writes what recurring captures share once.
    gists: bool = setting(True, "maintenance distils recurring episodes, pitfalls and handoffs into gists")
    gist_threshold: float = setting(
        0.6, "similarity at which captured memories of a project are alike enough to share a gist", ge=0.0, le=1.0
    )
    # How long the prune keeps a captured memory in no gist, in case it recurs (0: no longer than
    # it lasts by itself); what it costs is a bigger store (docs/lifecycle.md#gists).
    gist_window_days: float = setting(
        14.0, "days a captured memory in no gist is kept from the prune in case it recurs", ge=0.0
    )
    # Off by default: a gist then says only what its sources said, each line traceable.
    gist_command: str | None = setting(
        None, "a command that rewrites a gist: the extractive text on stdin, the new one on stdout", shown="unset"
    )
    # Tiers (docs/lifecycle.md): each multiplies the stability of the memories in it, so a
    # scratch note is gone in days and an operating rule practically never decays.
    tier_working: float = setting(0.4, "how much a working memory's stability is multiplied by", gt=0.0)
    tier_episodic: float = setting(1.0, "how much an episodic memory's stability is multiplied by", gt=0.0)
    tier_semantic: float = setting(2.5, "how much a semantic memory's stability is multiplied by", gt=0.0)
    tier_procedural: float = setting(8.0, "how much a procedural memory's stability is multiplied by", gt=0.0)
    # Expiry: a time to live by memory type or tier, one `name=days` a line (a memory's own
    # ttl_days, given at write, wins; its type's, then its tier's apply otherwise).
    ttl_days: tuple[str, ...] = setting(
        (), "default time to live by type or tier, one name=days per line, e.g. working=30", shown="none"
    )
    prune_threshold: float = setting(0.05, "strength below which unprotected memories are pruned", ge=0.0, le=1.0)
    maintenance_hours: float = setting(12.0, "hours between maintenance runs in the daemon", gt=0.0)
    # A DuckDB store only: PostgreSQL is backed up with pg_dump (docs/backups.md).
    backup_keep: int = setting(7, "daily backups the maintenance job keeps in ENGRAM_HOME/backups (0: none)", ge=0)
    consolidated_retention_days: float = setting(30.0, "days consolidated sources are kept")
    heartbeat_timeout_s: float = setting(
        300.0, "seconds of silence before a session counts as interrupted", env_name="ENGRAM_HEARTBEAT_TIMEOUT"
    )
    # A claim on a task (engram/continuity/claims.py) lapses when its session ends or is interrupted (a
    # killed stdio server: at once, the daemon sees its connection drop), or after this much
    # silence. The stdio server sends a heartbeat every fifth of it while its host is alive, so
    # an agent thinking for an hour between calls keeps its task; only a session that is gone
    # without a disconnect (an HTTP client, a frozen process, a dead server on a shared
    # PostgreSQL) holds a task this long, and take_over frees it sooner.
    claim_timeout_s: float = setting(
        120.0, "seconds of silence after which a session's task claims lapse", gt=0.0, env_name="ENGRAM_CLAIM_TIMEOUT"
    )
    # The daemon exits after this many seconds with no client connected (0: never). A restart
    # costs about a second once the model's ONNX graph is checked, while an idle daemon holds
    # some 400 MB; a quarter of an hour spans the pauses of a working session.
    idle_exit_s: float = setting(
        900.0, "seconds with no client after which the daemon exits (0: never)", ge=0.0, env_name="ENGRAM_IDLE_EXIT"
    )
    token: str | None = setting(None, "HTTP bearer token; required to bind a non-loopback address", shown="unset")
    redact_patterns: tuple[str, ...] = setting((), "extra regexes to redact, one per line", shown="none")
    # A value a rule mistakes for a secret (a test fixture's fake key, a public client id) is
    # listed here and then kept wherever it appears.
    redact_allow: tuple[str, ...] = setting((), "values never redacted, one per line", shown="none")
    chunk_size: int = setting(1000, "characters per chunk of long content")
    chunk_overlap: int = setting(100, "characters shared by consecutive chunks", ge=0)
    max_content_chars: int = setting(
        100_000, "the largest content accepted, in characters", env_name="ENGRAM_MAX_CONTENT"
    )
    torch_threads: int = setting(1, "CPU threads for a query's embedding")
    onnx: bool = setting(True, "encode with ONNX Runtime when the model allows it (0: torch)")
    user_id: str = setting("default", "the user when a client names none", env_name="ENGRAM_USER")
    # The agent lifecycle hooks (`engram hook`, docs/hooks.md).
    hook_start: bool = setting(True, "at session start, inject the project's open tasks and the resume block")
    hook_start_tokens: int = setting(1500, "token budget of the block a session starts with", ge=50, le=100_000)
    hook_prompt: bool = setting(True, "with each prompt, inject the memories clearly relevant to it")
    hook_prompt_tokens: int = setting(300, "token budget of the memories added to a prompt", ge=50, le=100_000)
    hook_checkpoint: bool = setting(True, "before compaction and at session end, store an automatic checkpoint")
    # What the hooks capture after each turn without any model (docs/hooks.md, "Capture").
    capture_fixes: bool = setting(True, "after each turn, store an error that edits made pass as a pitfall")
    capture_episodes: bool = setting(True, "after each turn, store its request and answer as an episode")
    capture_conventions: bool = setting(True, "store the conventions the user states in prompts as project facts")
    capture_off_projects: tuple[str, ...] = setting(
        (), "projects in which nothing is captured automatically: an id, a name or a path, one per line", shown="none"
    )
    capture_episode_budget: int = setting(
        2000, "episodes kept per project; maintenance prunes the oldest unused", ge=10, le=1_000_000
    )
    # Shared project memory (docs/sharing.md): engram commits its records, and pushes only when asked.
    share_push: bool = setting(False, "`engram sync` also pushes the commit of the shared records it made")
    # A project whose sessions must leave nothing behind (a client's code, a private repository):
    # its hooks store nothing and inject nothing. A `.engramignore` file at the work tree's top
    # does the same from inside the repository.
    hook_exclude: tuple[str, ...] = setting(
        (), "projects the hooks never capture: an id, a name or a path, one per line", shown="none"
    )
    # The client waits for the hook (Claude Code 60 s by default); a hook gives up well before.
    hook_timeout_s: float = setting(
        8.0, "seconds a hook waits for the daemon, starting it included", gt=0.0, env_name="ENGRAM_HOOK_TIMEOUT"
    )

    @property
    def db_path(self) -> Path:
        return self.home / "memories.duckdb"

    @property
    def store(self) -> str:
        """The store these settings name, as store_identity gives it (what a daemon must serve)."""
        return store_identity(self.database_url or self.db_path)

    @property
    def socket_path(self) -> Path:
        return self.home / "engram.sock"

    @property
    def model_cache(self) -> Path:
        """ENGRAM_MODEL_CACHE; else a home's own model_cache folder, kept where an older version
        made one (it may hold a downloaded model); else the machine's cache, shared by every home."""
        if self.model_cache_dir:
            return Path(self.model_cache_dir).expanduser()
        own = self.home / "model_cache"
        if own.is_dir():
            return own
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "engram"

    @property
    def tier_factors(self) -> dict[str, float]:
        """The stability multiplier of each tier (engram.core.types.MEMORY_TIERS)."""
        return {
            "working": self.tier_working,
            "episodic": self.tier_episodic,
            "semantic": self.tier_semantic,
            "procedural": self.tier_procedural,
        }

    def default_ttls(self) -> dict[str, float]:
        """ENGRAM_TTL_DAYS as {type or tier: days}; ValueError naming the line that is wrong."""
        out: dict[str, float] = {}
        for line in self.ttl_days:
            name, sep, days = line.partition("=")
            name = name.strip()
            try:
                value = float(days) if sep else float("nan")
            except ValueError:
                value = float("nan")
            if name not in MEMORY_TYPES + MEMORY_TIERS or not value > 0:
                raise ValueError(
                    f"ENGRAM_TTL_DAYS line {line!r} must be name=days with a memory type or tier "
                    "and a positive number of days, e.g. working=30"
                )
            out[name] = value
        return out

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> Settings:
        """Settings from ENGRAM_* variables (os.environ by default), then `overrides`, validated."""
        env = dict(os.environ if env is None else env)
        # Only the variables that are set: the others keep the field's default (home's is computed
        # now, from the current user's home folder).
        values = {s.name: s.parse(raw) for s in SETTINGS if (raw := env.get(s.env)) not in (None, "")}
        s = cls(**{**values, **overrides})
        s.validate()
        return s

    def validate(self) -> None:
        """Raise ValueError naming the variable of the first setting out of its bounds."""
        for s in SETTINGS:
            s.check(getattr(self, s.name))
        if self.dedup_threshold > self.reinforce_threshold:
            raise ValueError("ENGRAM_DEDUP_THRESHOLD must not exceed ENGRAM_REINFORCE_THRESHOLD")
        if not self.chunk_overlap < self.chunk_size:
            raise ValueError("ENGRAM_CHUNK_OVERLAP must be smaller than ENGRAM_CHUNK_SIZE")
        self.default_ttls()  # a malformed line is refused at start, not at a write
        if self.database_url and not is_database_url(self.database_url):
            scheme = self.database_url.split("://", 1)[0] if "://" in self.database_url else "no scheme"
            raise ValueError(f"ENGRAM_DATABASE_URL must be a postgresql:// or postgres:// URL (got {scheme})")


def _declarations() -> tuple[Setting, ...]:
    types = typing.get_type_hints(Settings)
    out = []
    for f in fields(Settings):
        spec: Setting = f.metadata["setting"]
        default = f.default_factory() if callable(f.default_factory) else f.default
        out.append(
            replace(
                spec, name=f.name, env=spec.env_name or f"ENGRAM_{f.name.upper()}", type=types[f.name], default=default
            )
        )
    return tuple(out)


SETTINGS: tuple[Setting, ...] = _declarations()
SETTING_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
for _s in SETTINGS:
    if _s.type not in _PARSERS:
        raise TypeError(f"setting {_s.name} has a type with no parser: {_s.type}")


def is_database_url(path_or_url: str | Path) -> bool:
    """True for a PostgreSQL URL (postgresql:// or postgres://); anything else is a DuckDB path."""
    return str(path_or_url).startswith(("postgresql://", "postgres://"))


# The connection parameters that pick where the rows are (libpq's names). The others (sslmode,
# timeouts, application_name, ...) change how a connection is made, not which database it reaches.
_STORE_PARAMS = ("host", "hostaddr", "port", "dbname", "user")


def store_identity(path_or_url: str | Path) -> str:
    """Which store a path or URL names, comparable between processes and safe to show.

    A DuckDB file: its resolved absolute path. A PostgreSQL URL: user, host, port and database
    only, in one spelling (postgres:// as postgresql://, port 5432 when none is given, query
    parameters overriding the URL's parts as libpq lets them). The password is left out rather
    than hashed: it authenticates, it does not pick the database (after a password change both
    URLs reach the same rows), so a client never has to send it, even hashed, and an error may
    show the identity as it is. Other parameters are left out for the same reason.
    """
    s = str(path_or_url)
    if not is_database_url(s):
        return s if s == ":memory:" else str(Path(s).expanduser().resolve())
    parts = urlsplit(s)
    try:
        port = str(parts.port or "")
    except ValueError:  # not a number: compared as written
        port = parts.netloc.rsplit(":", 1)[-1]
    values = {
        "user": unquote(parts.username or ""),
        "host": unquote(parts.hostname or ""),
        "port": port,
        "dbname": unquote(parts.path.lstrip("/")),
    }
    values |= {k: v for k, v in parse_qsl(parts.query) if k in _STORE_PARAMS and v}
    values["port"] = values["port"] or "5432"
    host = values["host"]
    # A Unix socket directory (a path) or several hosts cannot stand in the netloc: a parameter.
    in_netloc = host if host and "/" not in host and "," not in host else ""
    if ":" in in_netloc:
        in_netloc = f"[{in_netloc}]"  # IPv6
    netloc = (f"{quote(values['user'], safe='')}@" if values["user"] else "") + in_netloc + f":{values['port']}"
    query = [(k, values[k]) for k in ("host", "hostaddr") if values.get(k) and not (k == "host" and in_netloc)]
    return urlunsplit(("postgresql", netloc, "/" + quote(values["dbname"]), urlencode(query, safe="/,"), ""))


def onnx_from_env(env: dict[str, str] | None = None) -> bool:
    """ENGRAM_ONNX: embed through ONNX Runtime when the model allows it (default on)."""
    s = SETTING_BY_NAME["onnx"]
    return s.parse((os.environ if env is None else env).get(s.env))
