"""What per-turn capture stores: an error fixed by edits or by a changed command as one pitfall,
and each turn as an episode of its session; and the per-project budget of episodes.

The hooks' process reads the transcript and finds the fixes (engram.hooks.turn_capture,
engram.continuity.fixes); these functions store them through the facade's ordinary write path,
so redaction, write-time resolution and indexing apply as to every other memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engram.core.errors import STORE_FAULTS
from engram.core.types import AUTO_CAPTURE_TAG, EPISODE_TAG, EPISODE_TYPE, MEMORY_TYPES, PITFALL_TAG, EngramError
from engram.engram import Engram

__all__ = [
    "AUTO_CAPTURE_TAG",
    "EPISODE_TAG",
    "EPISODE_TYPE",
    "PITFALL_TAG",
    "fix_from_dict",
    "pitfall_metadata",
    "pitfall_tags",
    "prune_episodes",
    "session_capture",
]

PITFALL_IMPORTANCE = 0.6
EPISODE_IMPORTANCE = 0.2
# An answer that is none: what a client writes when the model was not asked (Claude Code's
# "No response requested." after a local command) or could not answer.
NO_ANSWER = re.compile(r"\A\s*(?:No response requested\.?\s*\Z|Request timed out\.?\s*\Z|API Error:)", re.I)
FIX_FIELDS = ("program", "signature", "location", "command", "passed", "edits", "key")


def fix_from_dict(raw: Any):
    """The Fix a hook sent (its to_dict), checked; EngramError names what is wrong."""
    from engram.continuity.fixes import Fix

    if not isinstance(raw, dict) or any(k not in raw for k in FIX_FIELDS):
        raise EngramError(f"a fix must be an object with {', '.join(FIX_FIELDS)}")
    edits = raw["edits"]
    if not isinstance(edits, list) or not all(
        isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("hunk"), str) for e in edits
    ):
        raise EngramError("a fix's edits must be a list of {file, hunk}")
    commands = raw.get("fix_commands") or []
    if not isinstance(commands, list) or not all(isinstance(c, str) and c.strip() for c in commands):
        raise EngramError("a fix's fix_commands must be a list of non-empty strings")
    origin = raw.get("origin") or "agent-run"
    if origin not in ("agent-run", "user-pasted"):
        raise EngramError("a fix's origin must be agent-run or user-pasted")
    # An error the user pasted has no command of its own; one the agent ran has the command that
    # failed and the one that then passed (itself the fix when nothing was edited).
    needed = (
        ("program", "signature", "key")
        if origin == "user-pasted"
        else ("program", "signature", "command", "passed", "key")
    )
    for k in ("program", "signature", "command", "passed", "key"):
        if not isinstance(raw[k], str) or (k in needed and not raw[k].strip()):
            raise EngramError(f"a fix's {k} must be a non-empty string")
    if origin == "user-pasted" and not edits:
        raise EngramError("a pasted error's fix must name the edits that fixed it")
    where = raw["location"] if isinstance(raw["location"], str) else None
    return Fix(
        raw["program"][:60],
        raw["signature"][:300],
        where,
        raw["command"][:2000],
        raw["passed"][:2000],
        tuple((e["file"][:500], e["hunk"][:4000]) for e in edits[:20]),
        raw["key"][:64],
        raw["detail"][:1000] if isinstance(raw.get("detail"), str) else "",
        tuple(c[:2000] for c in commands[:5]),
        origin,
        raw.get("moved_on") is True,
    )


def pitfall_tags(fix) -> list[str]:
    """A pitfall's tags: its kind, its program, its key (the same error fixed the same way) and origin."""
    return [PITFALL_TAG, f"component:{fix.program.lower()}", f"fix:{fix.key}", f"origin:{fix.origin}"]


def pitfall_metadata(fix) -> dict:
    """A pitfall's metadata: the failure record every failure memory has, and the fix as captured."""
    doc = {
        "error": fix.signature + (f" (at {fix.location})" if fix.location else ""),
        "component": fix.program,
        "root_cause": "",
        "fix": "\n".join([*(f"{f}:\n{h}" for f, h in fix.edits), *fix.fix_commands])
        or (f"run `{fix.passed}`" if fix.passed else ""),
    }
    return {"failure": doc, "capture": fix.to_dict()}


def _store_fix(eng: Engram, user: str | None, session_id: str, fix, task: str | None, project: str | None) -> bool:
    """Store one pitfall; True when it is new. The same error fixed the same way (its key) again
    reinforces the memory stored the first time, whatever command showed it."""
    key_tag = f"fix:{fix.key}"
    page = eng.list_memories(memory_type="failure", tags=[key_tag], limit=1, user_id=user, in_project=project or "")
    content = eng.get(page["memories"][0]["id"], user_id=user).content if page["memories"] else fix.content()
    # One the user kept (engram.continuity.keeping) stays unmarked when the fix comes back: the
    # reinforcement takes in the tags it is sent.
    kept = bool(page["memories"]) and AUTO_CAPTURE_TAG not in page["memories"][0]["tags"]
    mark = [] if kept else [AUTO_CAPTURE_TAG]
    r = eng.store_memory(
        content,
        memory_type="failure",
        importance=PITFALL_IMPORTANCE,
        tags=[*mark, *pitfall_tags(fix)],
        task_id=task,
        metadata=pitfall_metadata(fix),
        user_id=user,
        session_id=session_id,
        chunk=False,
        project=project,
    )
    return r.action == "new"


def session_capture(
    eng: Engram,
    user: str | None,
    session_id: str,
    client: str,
    fixes: list,
    episodes: list,
    task_id: str | None,
    project: str | None = None,
) -> dict:
    """Store a turn's capture: each fix as a pitfall of the session's task, each finished turn
    as an episode of the session (its `conversation`). What is captured at all is the hook's
    decision, by the settings where the client runs it (engram.hooks.run, turn_capture): the
    daemon's own were those of whichever process started it, and would apply to every client."""
    from engram.workflows.lifecycle import checkpoint_task  # the checkpoint's rule for which task this is

    out: dict[str, Any] = {"fixes": 0, "reinforced": 0, "episodes": 0, "task_id": None, "skipped": []}
    # One bad item costs that item (named in "skipped", which the hook logs), never the rest of
    # the turn's capture; a fault of the store itself (a full disk, a lock) still fails the call.
    items = []
    for i, f in enumerate(fixes):
        with _one_item(out, f"fix {i}"):
            items.append(fix_from_dict(f))
    turns = []
    for i, e in enumerate(episodes):
        if not isinstance(e, dict) or not isinstance(e.get("request"), str) or not isinstance(e.get("answer"), str):
            out["skipped"].append(f"episode {i}: an episode must be an object with request and answer strings")
        elif e["request"].strip() and e["answer"].strip() and not NO_ANSWER.match(e["answer"]):
            turns.append(e)
    if not items and not turns:
        return out
    task, _ = checkpoint_task(eng, user, task_id, project)
    out["task_id"] = task
    for i, fix in enumerate(items):
        with _one_item(out, f"fix {i}"):
            new = _store_fix(eng, user, session_id, fix, task, project)
            out["fixes" if new else "reinforced"] += 1
    # The turns in one batch (one model call, one transaction), their token vectors and a long
    # episode's later chunks' embeddings left to the background fill; a refused turn is named
    # and costs only itself.
    stored = eng.store_batch(
        [
            dict(
                content=f"User: {t['request'].strip()}\nAssistant: {t['answer'].strip()}",
                memory_type=EPISODE_TYPE,
                importance=EPISODE_IMPORTANCE,
                tags=[AUTO_CAPTURE_TAG, EPISODE_TAG, f"client:{client}"[:200]],
                task_id=task,
                metadata={"episode": {"session": session_id, "client": client}},
                user_id=user,
                session_id=session_id,
                conversation=session_id[:200],
                resolve_conflicts=False,
                project=project,
            )
            for t in turns
        ],
        fill_token_vectors=False,
    )
    for i, r in enumerate(stored):
        if isinstance(r, EngramError):
            out["skipped"].append(f"episode {i}: {r}")
        else:
            out["episodes"] += 1
    return out


@contextmanager
def _one_item(out: dict, what: str) -> Iterator[None]:
    """One item of a capture: refused (bad input) it is named in out["skipped"] and the rest goes
    on; a fault of the store (STORE_FAULTS) fails the whole call, to be sent again."""
    try:
        yield
    except STORE_FAULTS:
        raise
    except EngramError as e:
        out["skipped"].append(f"{what}: {e}")


def prune_episodes(idx: Any, mine: Any, budget: int) -> list[str]:
    """The episodes over each user's and project's budget, oldest unused first (never recalled
    before recalled, then least recently touched), for maintenance to remove; pinned ones stay.
    `idx` is the memory index, `mine` the mask of the rows maintenance covers."""
    import numpy as np

    n = idx.n
    rows = np.flatnonzero(
        mine[:n] & (idx.status[:n] == 0) & (idx.mtype[:n] == MEMORY_TYPES.index(EPISODE_TYPE)) & ~idx.pinned[:n]
    )
    groups: dict[tuple[int, int], list[int]] = {}
    for r in rows:
        groups.setdefault((int(idx.user[r]), int(idx.project[r])), []).append(int(r))
    doomed: list[str] = []
    for group in groups.values():
        if len(group) > budget:
            group.sort(key=lambda r: (idx.recall[r] > 0, float(idx.touched[r])))
            doomed += [idx.ids[r] for r in group[: len(group) - budget]]
    return doomed
