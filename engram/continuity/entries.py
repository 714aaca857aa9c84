"""The entries the task views build from the engine's records (a handoff, a progress snapshot, a
failure; their documents are read by core/documents.py): pure functions of memories."""

from __future__ import annotations

import re
from typing import Sequence

from engram.continuity.next_steps import StepCheck
from engram.core.documents import document, with_documents
from engram.core.types import Memory

# File names in progress notes, failures and handoffs: a name with a letter and a known extension,
# optionally with its folders. Versions (5.0) and abbreviations (e.g.) have no such extension.
_FILE = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]*[A-Za-z][\w-]*\.(?:py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|rb|php|"
    r"c|h|cc|cpp|hpp|cs|swift|scala|sql|sh|md|rst|txt|json|jsonl|ya?ml|toml|ini|cfg|conf|lock|html|"
    r"css|scss|vue|svelte|proto|tf|dockerfile|csv)\b"
)


def stated_checks(h: Memory, steps: Sequence[str]) -> list[StepCheck]:
    """Each next step of handoff `h` as its own record states it: not_started, except the steps
    of an automatic checkpoint, whose todo list said done or in_progress (the evidence is the
    checkpoint itself). Later activity can only make a step's evidence stronger."""
    cp = h.metadata.get("checkpoint")
    statuses = cp.get("step_statuses") if isinstance(cp, dict) else None
    if not isinstance(statuses, list) or len(statuses) != len(steps):
        return [StepCheck(s, "not_started", None) for s in steps]
    out = []
    for step, status in zip(steps, statuses):
        if status in ("done", "in_progress"):
            out.append(
                StepCheck(
                    step,
                    status,
                    {
                        "id": h.id,
                        "kind": "todo_list",
                        "text": f"{status} in the agent's todo list",
                        "created_at": h.created_at.isoformat(),
                        "similarity": 1.0,
                    },
                )
            )
        else:
            out.append(StepCheck(step, "not_started", None))
    return out


def unique(items: Sequence[str]) -> list[str]:
    """Items once each (case-insensitive), in first-seen order."""
    seen: dict[str, str] = {}
    for x in items:
        seen.setdefault(x.strip().lower(), x.strip())
    return [x for k, x in seen.items() if k]


def timeline_entry(m: Memory, quality: float) -> dict:
    """A memory as a task's timeline lists it, with its quality score."""
    return with_documents(
        {
            "id": m.id,
            "memory_type": m.memory_type,
            "content": m.content,
            "created_at": m.created_at.isoformat(),
            "status": m.status,
            "session_id": m.session_id,
            "quality_score": round(quality, 6),
        },
        m,
    )


def failure_entry(m: Memory) -> dict:
    doc = document(m, "failure") or {"error": m.content, "component": "", "root_cause": "", "fix": None}
    return {
        "id": m.id,
        "content": m.content,
        "created_at": m.created_at.isoformat(),
        "task_id": m.task_id,
        **doc,
        "component": doc["component"].lower(),
    }


def progress_by_feature(mems: Sequence[Memory]) -> dict[str, tuple[Memory, dict]]:
    """The latest progress snapshot of each feature (named as first written), oldest first."""
    latest: dict[str, tuple[str, Memory, dict]] = {}
    for m in mems:
        p = document(m, "progress") if m.memory_type == "progress" else None
        if p:
            key = p["feature"].strip().lower()
            name = latest[key][0] if key in latest else p["feature"]
            latest.pop(key, None)
            latest[key] = (name, m, p)
    return {name: (m, p) for name, m, p in latest.values()}


def to_keep(mems: Sequence[Memory], limit: int = 12) -> list[Memory]:
    """The task's decisions and conventions: its facts, strategies and assumptions, the
    pinned and most important first."""
    kept = [m for m in mems if m.status == "active" and m.memory_type in ("fact", "strategy", "assumption")]
    kept.sort(key=lambda m: (m.pinned, m.importance, m.created_at), reverse=True)
    return kept[:limit]


def working_set(mems: Sequence[Memory]) -> dict[str, list[str]]:
    """Files and components named in the task's progress, failures and handoffs."""
    files: list[str] = []
    components: list[str] = []
    for m in mems:
        if m.memory_type not in ("progress", "failure", "handoff"):
            continue
        if m.memory_type == "failure":
            comp = (document(m, "failure") or {}).get("component")
            if comp:
                components.append(comp)
        text = m.content
        if m.memory_type == "handoff":
            doc = document(m, "handoff") or {}
            text = " ".join(
                [doc.get("summary", "")]
                + [x for k in ("completed", "in_progress", "blocked", "next_steps") for x in doc.get(k, [])]
            )
        files.extend(f.rstrip(".") for f in _FILE.findall(text))
    return {"files": unique(files), "components": unique(components)}
