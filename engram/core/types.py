"""Domain values: frozen dataclasses passed between the engine's parts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

# Re-exported: callers have imported them from here since before engram/core/errors.py.
from engram.core.errors import EngramError as EngramError
from engram.core.errors import NotFound as NotFound

# "episode": a turn of a session (its request and answer) captured by the hooks; kept apart from
# the durable kinds in what is injected (engram.workflows.capture). Appended: the index codes types by position.
MEMORY_TYPES: tuple[str, ...] = ("fact", "strategy", "assumption", "failure", "handoff", "progress", "episode")
# The tag every automatic capture leaves (pitfalls, episodes, conventions), until the user keeps it
# (engram.continuity.keeping); here, below both continuity modules that write it.
AUTO_CAPTURE_TAG = "auto-capture"
CONVENTION_TAG = "convention"  # a project's rule (engram.continuity.conventions)
EPISODE_TYPE = "episode"  # a turn of a session captured as said (the request and the answer)
EPISODE_TAG = "episode"
PITFALL_TAG = "pitfall"  # an error a session fixed, with the changed lines
GIST_TAG = "gist"  # what several captured memories of a project share (engram.admin.gists)
MEMORY_STATUSES: tuple[str, ...] = ("active", "superseded", "consolidated", "deleted")
# How long a kind of memory lasts (docs/lifecycle.md): each tier scales a memory's stability
# (engram.search.decay), from a session's scratch that fades in days to a rule kept for good.
MEMORY_TIERS: tuple[str, ...] = ("working", "episodic", "semantic", "procedural")
# A memory's tier when none is given, by its type: a handoff or progress note is the state of work
# in hand (working); a captured turn or an assumption made along the way is what happened
# (episodic); a fact or a pitfall is what is true of the project (semantic); a strategy stored on
# purpose is how to do something (procedural). Origin and tags move some (default_tier).
TYPE_TIERS: dict[str, str] = {
    "handoff": "working",
    "progress": "working",
    "episode": "episodic",
    "assumption": "episodic",
    "fact": "semantic",
    "failure": "semantic",
    "strategy": "procedural",
}


def default_tier(memory_type: str, tags: tuple[str, ...] = (), conversation: str | None = None) -> str:
    """The tier a memory gets from its type and origin: a turn of a conversation is episodic
    whatever its type (it records what was said then); what capture wrote on its own is never
    procedural until the user keeps it (engram.continuity.keeping), so a captured convention is
    semantic."""
    if conversation is not None:
        return "episodic"
    tier = TYPE_TIERS.get(memory_type, "semantic")
    if memory_type == "fact" and CONVENTION_TAG in tags:
        tier = "procedural"  # a rule of the project the user stated (or kept): how work is done
    if tier == "procedural" and AUTO_CAPTURE_TAG in tags:
        return "semantic"
    return tier


def check_tier(tier: Any) -> str:
    if tier not in MEMORY_TIERS:
        raise EngramError(f"tier must be one of {', '.join(MEMORY_TIERS)}; got {tier!r}")
    return tier


TASK_STATUSES: tuple[str, ...] = ("open", "in_progress", "blocked", "done", "abandoned")
OPEN_TASK_STATUSES: tuple[str, ...] = ("open", "in_progress", "blocked")  # what a session may resume
SEARCH_MODES: tuple[str, ...] = ("hybrid", "bm25", "vector")
PROGRESS_STATUSES: tuple[str, ...] = ("planned", "in_progress", "blocked", "done")
OUTCOMES: tuple[str, ...] = ("success", "failure")
INTERRUPTION_REASONS: tuple[str, ...] = ("context_overflow", "rate_limit", "user_stop", "other")
MAX_TAG_CHARS = 200


def check_tags(tags: Any) -> tuple[str, ...]:
    """Tags as every path takes them: a list of strings, or one string meaning one tag."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
        raise EngramError("tags must be a list of strings")
    if len(tags) > 64:
        raise EngramError("at most 64 tags")
    longest = max((len(t) for t in tags), default=0)
    if longest > MAX_TAG_CHARS:  # a label to filter by, not a place for text
        raise EngramError(f"a tag is at most {MAX_TAG_CHARS} characters; got one of {longest:,}")
    return tuple(dict.fromkeys(t.strip() for t in tags if t.strip()))


@dataclass(frozen=True)
class Ctx:
    """Who is calling: one session per client connection or process."""

    session_id: str
    user_id: str | None = None
    client: str = ""
    pid: int | None = None
    # The project the caller works in (engram.core.project.detect_project; None: no project) and its
    # git branch, recorded on the session.
    project: str | None = None
    branch: str | None = None


@dataclass(frozen=True)
class Scope:
    """Which projects' rows a read sees: `project`'s plus those of no project (the global ones);
    with `everything`, every project's. Scope() is what a caller outside any project sees."""

    project: str | None = None
    everything: bool = False

    @classmethod
    def of(cls, project: str | None, all_projects: bool = False) -> Scope:
        return cls(project=project, everything=bool(all_projects))


EVERY_PROJECT = Scope(everything=True)  # no filter: what maintenance, export and ids see
NO_PROJECT = Scope()  # the rows of no project: what a caller outside any project sees


@dataclass(frozen=True)
class Memory:
    id: str
    content: str
    memory_type: str
    importance: float
    recall_count: int
    created_at: datetime
    last_recalled_at: datetime | None
    user_id: str
    task_id: str | None = None
    session_id: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    provenance: tuple[str, ...] = ()
    status: str = "active"
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    pinned: bool = False
    updated_at: datetime | None = None
    # Turns of one conversation (a chat import) share context in search; None: an independent memory.
    conversation: str | None = None
    stability: float | None = None  # days (search/decay.py); None until the first recall: S₀ applies
    project: str | None = None  # None: the memory belongs to no project (seen from every one)
    tier: str = "semantic"  # MEMORY_TIERS; scales its decay (engram.search.decay)
    expires_at: datetime | None = None  # None: never; from then on it is never returned

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, datetime):
                d[k] = v.isoformat()
            elif isinstance(v, tuple):
                d[k] = list(v)
        return d


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float
    quality_score: float
    parts: dict[str, float] | None = None
    # `strong` or `weak` and the evidence that decided it (ranking.confidence); None for a
    # memory not ranked.
    confidence: str | None = None
    evidence: str | None = None

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        d = {
            "id": m.id,
            "content": m.content,
            "memory_type": m.memory_type,
            "score": round(self.score, 6),
            "quality_score": round(self.quality_score, 6),
            "created_at": m.created_at.isoformat(),
            "importance": m.importance,
            "recall_count": m.recall_count,
            "task_id": m.task_id,
            "tags": list(m.tags),
            "status": m.status,
            "project": m.project,
            "tier": m.tier,
        }
        if self.confidence is not None:
            d["confidence"] = self.confidence
            d["evidence"] = self.evidence
        if self.parts is not None:
            d["explain"] = {k: round(v, 6) for k, v in self.parts.items()}
        return d


@dataclass(frozen=True)
class StoreResult:
    """What a store did: the action and the memory it created or touched."""

    action: str
    memory: Memory
    previous: Memory | None = None
    similarity: float | None = None
    reason: str = ""
    chunks: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "action": self.action,
            "memory_id": self.memory.id,
            "content": self.memory.content,
            "memory_type": self.memory.memory_type,
            "reason": self.reason,
        }
        if self.previous is not None:
            d["previous_id"] = self.previous.id
        if self.similarity is not None:
            d["similarity"] = round(self.similarity, 4)
        if self.chunks:
            d["chunk_ids"] = list(self.chunks)
        return d


@dataclass(frozen=True)
class Task:
    id: str
    name: str
    goal: str
    status: str
    metadata: dict[str, Any]
    user_id: str
    created_at: datetime
    updated_at: datetime
    project: str | None = None  # None: the task belongs to no project

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "goal": self.goal,
            "status": self.status,
            "metadata": self.metadata,
            "user_id": self.user_id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "project": self.project,
        }


@dataclass(frozen=True)
class Claim:
    """Who holds a task: the session that claimed it, since when, and when it was last heard
    from (its session's last heartbeat). `session_status` is that session's status."""

    task_id: str
    user_id: str
    session_id: str
    client: str
    since: datetime
    last_heard: datetime | None  # None: the session row is gone
    session_status: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "session_id": self.session_id,
            "client": self.client,
            "since": self.since.isoformat(),
            "last_heard": self.last_heard.isoformat() if self.last_heard else None,
        }


@dataclass(frozen=True)
class Session:
    id: str
    user_id: str
    client: str
    pid: int | None
    status: str  # active | ended | interrupted
    started_at: datetime
    last_heartbeat: datetime
    ended_at: datetime | None
    task_id: str | None
    outcome: str | None
    outcome_notes: str | None
    reported: bool
    interruption: str | None = None  # the reason given to report_interruption
    project: str | None = None  # where the client worked when the session started
    branch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, datetime):
                d[k] = v.isoformat()
        return d
