"""What a store is given: each item of a write checked and put in the form the write path reads
(its text and tags redacted, its type, user, project and lifecycle decided), or the error that
refuses it, before anything is written (engine/writes.py)."""

from __future__ import annotations

from typing import Mapping, Sequence

from engram.core.clock import utc
from engram.core.errors import STORE_FAULTS
from engram.core.project import check_project
from engram.core.types import EngramError, check_tags
from engram.core.validation import check_conversation, check_importance, check_text, check_type, refuse_unknown
from engram.engine.state import EngineState
from engram.engine.tiers import lifecycle_of


def checked_items(p: EngineState, items: Sequence[Mapping], fields: tuple[str, ...]) -> list[dict | EngramError]:
    """Each item prepared, or the error that refuses it (bad input, another user's task); a
    fault of the store itself (STORE_FAULTS) is raised. `fields`: the fields an item may carry."""
    out: list[dict | EngramError] = []
    for it in items:
        try:
            if not isinstance(it, Mapping):
                raise EngramError(f"an item must be an object of store fields, not {type(it).__name__}")
            item = prepare(p, dict(it), fields)
            # A memory may only name a task of its own user (handoff and track_failure refuse the same).
            if item["task_id"] is not None:
                p.task(item["task_id"], item["user_id"])
        except STORE_FAULTS:
            raise
        except EngramError as e:
            out.append(e)
        else:
            out.append(item)
    return out


def prepare(p: EngineState, item: dict, fields: tuple[str, ...]) -> dict:
    """One item checked and normalised: the fields the write path reads, every one set."""
    s = p.settings
    refuse_unknown("store", item, fields)
    content = check_text(item.get("content"), "content", s.max_content_chars)
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise EngramError("metadata must be an object")
    prov = item.get("provenance") or ()
    if isinstance(prov, str):
        prov = (prov,)
    task_id = item.get("task_id")
    if task_id is not None and not isinstance(task_id, str):
        raise EngramError("task_id must be a string")
    created = item.get("created_at")
    memory_type = check_type(item.get("memory_type", "fact"))
    tags = tuple(p.redact(t) for t in check_tags(item.get("tags")))
    conversation = check_conversation(item.get("conversation"))
    tier, ttl = lifecycle_of(s, memory_type, tags, conversation, item.get("tier"), item.get("ttl_days"))
    return dict(
        content=p.redact(content),  # verbatim: no strip, no re-casing
        memory_type=memory_type,
        importance=check_importance(item.get("importance", 0.5)),
        tags=tags,
        task_id=task_id,
        metadata=p.redact.value(metadata),
        provenance=tuple(str(source) for source in prov),
        user_id=p.user_of(item.get("user_id")),
        session_id=item.get("session_id"),
        pinned=bool(item.get("pinned", False)),
        created_at=utc(created) if created is not None else None,
        resolve_conflicts=bool(item.get("resolve_conflicts", True)),
        conversation=conversation,
        chunk=bool(item.get("chunk", True)),
        project=check_project(item.get("project")),
        tier=tier,
        ttl_days=ttl,
    )
