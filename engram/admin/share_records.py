"""A project's shareable memory as append-only records (docs/sharing.md): what is shared, the
records a store's changes become, and how records read from other machines enter the store.

A record is one JSON line: `r` (its own id), `op`, `at`, `by` (git identity), `machine`, and the
op's fields. Ops:

    memory  {id, type, content, tags, task, importance, doc}   a memory as it now is (new or changed)
    retire  {id, reason, by_id}                                 the memory is deleted or superseded: a tombstone
    task    {id, name, goal, status}                            a task as it now is
    claim   {task, session, client}                             a session here works on the task

`id` is stable across machines: the memory's id on the machine that first wrote it. Each machine
writes only its own files, so two clones never change one line; a store replays every record it
has not read, in (at, r) order, and remembers what it read (the ledger, in the store's meta table),
so any two stores that read the same records hold the same memories.

Nothing leaves without passing the redactor (secrets, <private> spans); episodes, memories tagged
`private`, memories of no project and other projects' memories are never shared.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engram.core.clock import utc
from engram.core.errors import NotFound
from engram.core.types import AUTO_CAPTURE_TAG, Memory, Task

if TYPE_CHECKING:
    from engram.engram import Engram

# The durable kinds: conventions and decisions (fact, strategy, assumption), pitfalls with their
# fixes (failure), a task's handoffs and progress. Never an episode (a turn of one session).
SHARED_TYPES = ("fact", "strategy", "assumption", "failure", "handoff", "progress")
PRIVATE_TAG = "private"  # a memory the user keeps to themself: never written to a record
DOC_KEYS = ("handoff", "progress", "failure")  # the record documents a plan and a timeline read
RECORD_OPS = ("memory", "retire", "task", "claim")
RETIRED = "retired"


def shareable(m: Memory, project: str) -> bool:
    """A memory that may leave this machine in `project`'s records."""
    return (
        m.project == project
        and m.status == "active"
        and m.memory_type in SHARED_TYPES
        and PRIVATE_TAG not in m.tags
        and not m.metadata.get("private")
    )


def shared_id(m: Memory) -> str:
    """The memory's id across machines: the id it had where it was first written."""
    origin = m.metadata.get("shared")
    return origin["id"] if isinstance(origin, dict) and isinstance(origin.get("id"), str) else m.id


def _digest(obj: Any) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def memory_state(m: Memory, redact: Any) -> dict:
    """The fields of a memory's record, redacted: what a teammate's store rebuilds it from."""
    doc = {k: m.metadata[k] for k in DOC_KEYS if k in m.metadata}
    return {
        "type": m.memory_type,
        "content": redact(m.content),
        "tags": sorted(redact(t) for t in m.tags if t != AUTO_CAPTURE_TAG),
        "task": m.task_id,
        "importance": round(float(m.importance), 3),
        "doc": redact.value(doc),
    }


def task_state(t: Task, redact: Any) -> dict:
    return {"name": redact(t.name), "goal": redact(t.goal), "status": t.status}


@dataclass
class Ledger:
    """What a store knows of a project's records: the record ids it read, how far it read each
    file (bytes), and for each shared id the local row and the state last written or read (so a
    memory read from a teammate is not written back as ours)."""

    project: str
    read: set[str] = field(default_factory=set)
    offsets: dict[str, int] = field(default_factory=dict)
    seen: dict[str, list] = field(default_factory=dict)  # key -> [local id | None, state digest]

    @staticmethod
    def key(project: str) -> str:
        return "share:" + hashlib.sha1(project.encode()).hexdigest()[:16]

    @classmethod
    def load(cls, eng: Engram, project: str) -> Ledger:
        raw = eng.store_db.get_meta(cls.key(project))
        if not raw:
            return cls(project)
        d = json.loads(raw)
        return cls(project, set(d["read"]), dict(d["offsets"]), dict(d["seen"]))

    def save(self, eng: Engram) -> None:
        d = {"read": sorted(self.read), "offsets": self.offsets, "seen": self.seen}
        eng.store_db.set_meta(self.key(self.project), json.dumps(d, separators=(",", ":")))

    def forget_all(self, eng: Engram) -> None:
        eng.store_db.set_meta(self.key(self.project), "")


@dataclass(frozen=True)
class Author:
    """Who writes this machine's records: the repository's git identity and this machine."""

    by: str  # "Name <email>"
    machine: str


def _record(op: str, author: Author, at: datetime, **fields: Any) -> dict:
    return {
        "r": uuid.uuid4().hex,
        "op": op,
        "at": utc(at).isoformat(),
        "by": author.by,
        "machine": author.machine,
        **fields,
    }


def outgoing(eng: Engram, user: str, project: str, ledger: Ledger, author: Author) -> list[dict]:
    """The records this store's changes since the last sync make, the ledger updated as if they
    were written (the caller saves it only once they are)."""
    redact, now = eng.redact, eng.clock.now()
    out: list[dict] = []
    live: set[str] = set()
    superseded: dict[str, str] = {}
    for m, _blob in eng.store_db.iter_memory_rows(user):
        if m.project != project:
            continue
        if m.status == "superseded" and m.superseded_by:
            superseded[m.id] = m.superseded_by
        if not shareable(m, project):
            continue
        live.add(m.id)
        sid, state = shared_id(m), memory_state(m, redact)
        digest = _digest(state)
        if ledger.seen.get(sid, [None, None])[1] != digest:
            out.append(_record("memory", author, m.updated_at or m.created_at, id=sid, **state))
            ledger.seen[sid] = [m.id, digest]
    local_to_shared = {v[0]: k for k, v in ledger.seen.items() if not k.startswith(("task:", "claim:"))}
    for sid, (local, digest) in list(ledger.seen.items()):
        if sid.startswith(("task:", "claim:")) or digest == RETIRED or local in live:
            continue
        by = superseded.get(local)
        fields = {"reason": "superseded", "by_id": local_to_shared.get(by, by)} if by else {"reason": "deleted"}
        out.append(_record("retire", author, now, id=sid, **fields))
        ledger.seen[sid] = [None, RETIRED]
    for t in eng.store_db.all_tasks(user):
        if t.project != project:
            continue
        state = task_state(t, redact)
        digest = _digest(state)
        if ledger.seen.get("task:" + t.id, [None, None])[1] != digest:
            out.append(_record("task", author, t.updated_at, id=t.id, **state))
            ledger.seen["task:" + t.id] = [t.id, digest]
    claims = eng.store_db.task_claims(user)
    for task_id, c in claims.items():
        key = "claim:" + task_id
        if ("task:" + task_id) in ledger.seen and ledger.seen.get(key, [None, None])[1] != c.session_id:
            out.append(_record("claim", author, c.since, task=task_id, session=c.session_id, client=c.client))
            ledger.seen[key] = [task_id, c.session_id]
    for key, (task_id, session) in list(ledger.seen.items()):
        if key.startswith("claim:") and session is not None and task_id not in claims:
            out.append(_record("claim", author, now, task=task_id, session=None, client=""))  # released
            ledger.seen[key] = [task_id, None]
    return out


def record_order(rec: dict) -> tuple:
    # Tasks before the memories that link to them; then time, then the record's own id.
    return (rec["op"] != "task", rec["at"], rec["r"])


def apply_records(eng: Engram, user: str, project: str, ledger: Ledger, records: list[dict], mine: str) -> dict:
    """Replay records read from the project's files into the store (those of `mine`, this
    machine, are already here). Returns counts by what happened. Memories new here are stored in
    batches (one embedding pass and one transaction each), in the records' order."""
    done = {"stored": 0, "merged": 0, "updated": 0, "retired": 0, "tasks": 0, "claims": 0, "skipped": 0}
    batch: list[dict] = []
    batched: set[str] = set()

    def flush() -> None:
        for what in _store_new(eng, user, project, ledger, batch):
            done[what] += 1
        batch.clear()
        batched.clear()

    for rec in sorted(records, key=record_order):
        if rec["r"] in ledger.read:
            continue
        ledger.read.add(rec["r"])
        if rec.get("machine") == mine:
            done["skipped"] += 1
            continue
        if rec["op"] == "memory" and rec["id"] not in ledger.seen and rec["id"] not in batched:
            batch.append(rec)
            batched.add(rec["id"])
            if len(batch) >= IMPORT_BATCH:
                flush()
            continue
        flush()
        what = _APPLY[rec["op"]](eng, user, project, ledger, rec)
        done[what] += 1
    flush()
    return done


IMPORT_BATCH = 500  # new memories stored per store_many call


def _local(eng: Engram, user: str, local: str | None) -> Memory | None:
    if local is None:
        return None
    try:
        return eng.get(local, user)
    except NotFound:
        return None


def _apply_memory(eng: Engram, user: str, project: str, ledger: Ledger, rec: dict) -> str:
    sid = rec["id"]
    local, digest = ledger.seen.get(sid, [None, None])
    if digest == RETIRED:
        return "skipped"  # a tombstone read before: deletion wins over a later edit elsewhere
    have = _local(eng, user, local)
    doc = rec.get("doc") or {}
    if have is not None and have.memory_type == rec["type"] and have.content == rec["content"]:
        ledger.seen[sid] = [have.id, _digest(memory_state(have, eng.redact))]
        return "skipped"
    if have is not None and not doc and have.memory_type == rec["type"]:
        res = eng.update(have.id, rec["content"], user_id=user)
        ledger.seen[sid] = [res.memory.id, _digest(memory_state(res.memory, eng.redact))]
        return "updated"
    if have is not None:  # a record document is rewritten whole: its text is rendered from it
        eng.forget(have.id, user_id=user)
    what = _store_new(eng, user, project, ledger, [rec])[0]
    return "updated" if have is not None and what == "stored" else what


def _store_new(eng: Engram, user: str, project: str, ledger: Ledger, recs: list[dict]) -> list[str]:
    """Store memories read from records through write-time resolution: a restatement of one
    known here becomes that memory (merged); each keeps who wrote it (metadata `shared`)."""
    if not recs:
        return []
    items = []
    for rec in recs:
        doc = rec.get("doc") or {}
        task = rec.get("task")
        if task and eng.store_db.get_task(task) is None:
            task = None  # a task not shared: the memory stands alone here
        origin = {"id": rec["id"], "by": rec["by"], "machine": rec["machine"], "at": rec["at"]}
        items.append(
            dict(
                content=rec["content"],
                memory_type=rec["type"],
                importance=float(rec.get("importance", 0.5)),
                tags=rec.get("tags") or None,
                task_id=task,
                metadata={**doc, "shared": origin},
                user_id=user,
                created_at=datetime.fromisoformat(rec["at"]),
                resolve_conflicts=not doc,
                chunk=not doc,
                project=project,
            )
        )
    out = []
    for rec, res in zip(recs, eng.store_many(items), strict=True):
        ledger.seen[rec["id"]] = [res.memory.id, _digest(memory_state(res.memory, eng.redact))]
        # reinforce / merge: restated here before, one memory now known under both ids.
        out.append("merged" if res.action in ("reinforce", "merge") else "stored")
    return out


def _apply_retire(eng: Engram, user: str, project: str, ledger: Ledger, rec: dict) -> str:
    local = ledger.seen.get(rec["id"], [None, None])[0]
    ledger.seen[rec["id"]] = [None, RETIRED]
    have = _local(eng, user, local)
    if have is None:
        return "skipped"
    # Another shared id resolved into the same memory here stays known as retired too, so the
    # next sync does not write a tombstone of its own for it.
    for sid, (other, _d) in list(ledger.seen.items()):
        if other == have.id:
            ledger.seen[sid] = [None, RETIRED]
    eng.forget(have.id, user_id=user)
    return "retired"


def _apply_task(eng: Engram, user: str, project: str, ledger: Ledger, rec: dict) -> str:
    at = datetime.fromisoformat(rec["at"])
    state = {"name": rec["name"], "goal": rec.get("goal", ""), "status": rec["status"]}
    have = eng.store_db.get_task(rec["id"])
    if have is None:
        eng.store_db.insert_task(
            Task(rec["id"], state["name"], state["goal"], state["status"], {}, user, at, at, project)
        )
    elif utc(at) > have.updated_at:  # the later change wins, wherever it was made
        eng.store_db.update_task(rec["id"], utc(at), **state)
    else:
        return "skipped"
    ledger.seen["task:" + rec["id"]] = [rec["id"], _digest(state)]
    return "tasks"


def _apply_claim(eng: Engram, user: str, project: str, ledger: Ledger, rec: dict) -> str:
    t = eng.store_db.get_task(rec["task"])
    if t is None:
        return "skipped"
    meta = {k: v for k, v in t.metadata.items() if k != "claimed_elsewhere"}
    if rec.get("session"):  # None: released there
        meta["claimed_elsewhere"] = {
            "by": rec["by"],
            "machine": rec["machine"],
            "client": rec.get("client", ""),
            "at": rec["at"],
        }
    eng.store_db.update_task(t.id, t.updated_at, metadata=meta)
    return "claims"


_APPLY = {"memory": _apply_memory, "retire": _apply_retire, "task": _apply_task, "claim": _apply_claim}
