"""Gists (docs/lifecycle.md#gists): what several captured memories of one project share, written
once, without a model.

Maintenance looks at the captured memories that recur: episodes (a turn's request and answer),
failures (pitfalls) and handoffs. Within one user, one project and one kind, two of them are alike
when their vectors are within ENGRAM_GIST_THRESHOLD and their texts share at least SHARED_TERMS
content words. The memory alike to the most others (the seed) with its alike peers, at least
MIN_MEMBERS of them from at least MIN_SESSIONS sessions, is a cluster, and becomes one gist: a
`fact` (a `failure` for failures) of the semantic tier tagged `gist`, whose lines are the sentences,
commands (`code`) and file paths that half its members or more say, each copied verbatim from one of
them, with how many members say it (and below them the requests an episodes' gist answers, as its
members were asked them), under a header that counts its
members and sessions and spans their dates. Nothing in a gist is written by engram but that header
and the counts (unless ENGRAM_GIST_COMMAND names a command that rewrites it), and a sentence with a
redacted secret is never taken. Its metadata (`gist`) names, for every line, the members that say
it, so each line can be traced to its sources (provenance lists them; the `consolidate` event of its
history too).

The gist carries its members' combined stability (their base stabilities added) from their latest
use; its members move to the working tier (a `tier` event by the gist), so they fade in days rather
than weeks and are then pruned as any faded memory is. They are not deleted at once: what is
particular to one occurrence (the exact diff of one fix) stays findable for those days, and nothing
is lost if the gist missed it. Pinned memories and those the user kept stay in their tier.

A memory alike to an existing gist (or to one of its members still stored) that says one of its
lines joins it on a later run: the gist's lines are counted again with it, its stability grows by
the member's, and no second gist is written. Two gists of a group that are alike and state a line
in common (a cluster that formed beside its gist, a teammate's gist imported) become one: the older
absorbs the other's sources, lines and stability, and the other is deleted. A run that finds no new
member and nothing to merge changes no gist. What may still recur is spared by the prune meanwhile
(plan_gists: ENGRAM_GIST_WINDOW_DAYS, PENDING_DAYS); an episode kept so, past its fading, is not
recalled (MemoryIndex.faded_episodes).
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from engram.admin.gist_text import compose, trace, unit_key, units_of
from engram.core.ids import new_id
from engram.core.types import GIST_TAG, MEMORY_TYPES, Memory
from engram.search.decay import MAX_STABILITY, base_stability
from engram.search.memory_index import to_days
from engram.text.tokens import tokenize

if TYPE_CHECKING:
    from engram.engram import Engram

log = logging.getLogger(__name__)

# The kinds of captured memory that gist, each among its own kind; what type the gist is.
KINDS = {"episode": "fact", "failure": "failure", "handoff": "fact"}
MIN_MEMBERS = 3
MIN_SESSIONS = 2
SHARED_TERMS = 3  # content words two alike memories have in common, beside their vectors' similarity
# How long the prune spares what may recur before a gist holds it: a captured memory from its
# creation, two alike ones from two sessions from the newer one's.
PENDING_DAYS = 30
SUMMARISER_TIMEOUT_S = 30
__all__ = ["GIST_TAG", "apply_gists", "plan_gists", "report_entry", "trace", "units_of"]


def plan_gists(eng: Engram, mine: np.ndarray, now: datetime) -> tuple[list[dict[str, Any]], set[str]]:
    """What this run would write, and the recurrences in progress.

    The plans: a new gist per new cluster, an update per gist with new members or alike gists to
    absorb, each {action: new | update, gist_id, kind, members: [Memory], gist: Memory | None,
    content, lines, meta, absorbed: [gist id]}.
    The recurrences in progress, which the prune spares: the ids of captured memories younger than
    ENGRAM_GIST_WINDOW_DAYS in no gist, and of alike memories from two sessions or more, too few yet for a
    gist, the newest of them younger than PENDING_DAYS; so a problem that comes back every week or
    two can make its gist although one episode alone fades in days.
    `mine`: the rows maintenance covers. A member may be one the prune then removes (it faded):
    what it said is in the gist first."""
    idx, s = eng.index, eng.settings
    n = idx.n
    active = mine & (idx.status[:n] == 0) & (idx.expires[:n] == np.inf)
    gist_rows = [r for r in idx.tag_rows.get(GIST_TAG, set()) if r < n and active[r]]
    gists = eng.store_db.get_memories([idx.ids[r] for r in gist_rows])
    taken = {i for g in gists.values() for i in (g.metadata.get("gist") or {}).get("sources", [])}
    plans: list[dict[str, Any]] = []
    pending: set[str] = set()
    for kind in KINDS:
        code = MEMORY_TYPES.index(kind)
        ok = active & (idx.mtype[:n] == code) & ~idx.pinned[:n]
        rows = [int(r) for r in np.flatnonzero(ok) if idx.ids[r] not in taken]
        rows = [r for r in rows if r not in idx.tag_rows.get(GIST_TAG, set())]
        kind_gists = [g for g in gists.values() if (g.metadata.get("gist") or {}).get("kind") == kind]
        groups: dict[tuple[int, int], list[int]] = {}
        for r in rows:
            groups.setdefault((int(idx.user[r]), int(idx.project[r])), []).append(r)
        for g in kind_gists:
            groups.setdefault((int(idx.user[idx.row_of[g.id]]), int(idx.project[idx.row_of[g.id]])), [])
        for (user, project), members in sorted(groups.items()):
            anchors = [
                g for g in kind_gists if idx.user[idx.row_of[g.id]] == user and idx.project[idx.row_of[g.id]] == project
            ]
            # Repeated gists of one recurrence become one before anything joins them.
            anchors, absorbed = _merge_alike(eng, kind, anchors, s.gist_threshold)
            found, waiting = _plan_group(eng, kind, members, anchors, s.gist_threshold)
            by_gist = {p["gist_id"]: p for p in found if p["gist_id"]}
            for g in anchors:
                if absorbed.get(g.id) and g.id not in by_gist:
                    by_gist[g.id] = _update_plan(eng, kind, g, [])
                    found.append(by_gist[g.id])
                if g.id in by_gist:
                    by_gist[g.id]["absorbed"] = absorbed.get(g.id, [])
            plans += found
            for few in waiting:
                if (now - max(m.created_at for m in few)).days < PENDING_DAYS:
                    pending.update(m.id for m in few)
            # One alone may be the first of a recurrence: it waits the window (gist_window_days) for the next.
            placed = {m.id for p in found for m in p["members"]}
            young = [r for r in members if to_days(now) - idx.created[r] < s.gist_window_days]
            pending.update(idx.ids[r] for r in young if idx.ids[r] not in placed)
    return plans, pending


def _said(gist: Memory) -> set[Any]:
    """What a gist states (its lines but the questions it answers), as unit keys."""
    return {unit_key(line["text"]) for line in gist.metadata["gist"]["lines"] if not line["text"].startswith("User:")}


def _merge_alike(
    eng: Engram, kind: str, anchors: list[Memory], threshold: float
) -> tuple[list[Memory], dict[str, list[str]]]:
    """Gists of one group that are alike (vectors within `threshold`) and state a line in common
    are one recurrence gisted twice (a cluster that formed beside its gist): the oldest absorbs
    the others. Returns the group's gists as they would be after (an absorbing one with their
    sources, lines recounted over all of them, stabilities added) and {absorbing id: absorbed ids}.
    A merge whose lines would no longer state anything (no line said by half of all the
    sources) is not made."""
    idx = eng.index
    kept: list[Memory] = []
    absorbed: dict[str, list[str]] = {}
    for g in sorted(anchors, key=lambda g: (g.created_at, g.id)):
        vec = idx.vectors[idx.row_of[g.id]]
        for k, keep in enumerate(kept):
            if float(vec @ idx.vectors[idx.row_of[keep.id]]) < threshold or not _said(g) & _said(keep):
                continue
            merged = _merged(eng, kind, keep, g)
            if merged is not None:
                kept[k] = merged
                absorbed.setdefault(keep.id, []).append(g.id)
                break
        else:
            kept.append(g)
    return kept, absorbed


def _merged(eng: Engram, kind: str, keep: Memory, other: Memory) -> Memory | None:
    """`keep` with `other`'s sources, its lines recounted over both (not written), or None when no
    line but a question would remain."""
    a, b = keep.metadata["gist"], other.metadata["gist"]
    ids = list(dict.fromkeys([*a["sources"], *b["sources"]]))
    stored = eng.store_db.get_memories(ids)
    carried = [{**line, "sources": [i for i in line["sources"] if i not in stored]} for line in a["lines"] + b["lines"]]
    sessions = set(a["sessions"]) | set(b["sessions"])
    dates = [a["first"], a["last"], b["first"], b["last"]]
    text = compose(list(stored.values()), carried, kind, sessions, _span(dates), len(ids))
    if not any(not line["text"].startswith("User:") for line in text["lines"]):
        return None
    return replace(
        keep,
        content=text["content"],
        importance=max(keep.importance, other.importance),
        last_recalled_at=max(x.last_recalled_at or x.created_at for x in (keep, other)),
        metadata={**keep.metadata, "gist": _meta(kind, ids, sessions, dates, text["lines"])},
        provenance=tuple(dict.fromkeys([*keep.provenance, *other.provenance])),
        stability=min(MAX_STABILITY, base_stability(keep) + base_stability(other)),
    )


def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


def _plan_group(
    eng: Engram, kind: str, rows: list[int], anchors: list[Memory], threshold: float
) -> tuple[list[dict], list[list[Memory]]]:
    """Join the group's memories to the gists they are alike to, then cluster the rest. Returns
    the plans and the members of the clusters too small yet (a recurrence in progress)."""
    idx = eng.index
    mems = eng.store_db.get_memories([idx.ids[r] for r in rows])
    rows = [r for r in rows if idx.ids[r] in mems]
    if not rows:
        return [], []
    terms = {r: _terms(mems[idx.ids[r]].content) for r in rows}
    vecs = idx.vectors[np.array(rows)]
    plans: list[dict] = []
    best = _joining(eng, rows, mems, terms, vecs, anchors, threshold)
    by_id = {g.id: g for g in anchors}
    for gid in sorted(set(best.values())):
        new = [mems[idx.ids[r]] for r in rows if best.get(r) == gid]
        plans.append(_update_plan(eng, kind, by_id[gid], new))
    # 2. The rest: a seed with its alike peers, the best-connected seed first.
    rest = [k for k, r in enumerate(rows) if r not in best]
    sims = vecs[rest] @ vecs[rest].T
    near: list[set[int]] = [set() for _ in rest]
    # The vectors pick the candidate pairs at once; only those have their words compared.
    for i, j in zip(*np.nonzero(sims >= threshold)):
        if i != j and len(terms[rows[rest[i]]] & terms[rows[rest[j]]]) >= SHARED_TERMS:
            near[i].add(int(j))
    used: set[int] = set()
    waiting: list[list[Memory]] = []
    for seed in sorted(range(len(rest)), key=lambda i: (-len(near[i]), idx.created[rows[rest[i]]], i)):
        if seed in used:
            continue
        cluster = [seed, *sorted(near[seed] - used)]
        members = [mems[idx.ids[rows[rest[i]]]] for i in cluster]
        if len({m.session_id for m in members if m.session_id}) < MIN_SESSIONS:
            continue
        if len(members) < MIN_MEMBERS:
            waiting.append(members)
            continue
        plan = _new_plan(kind, members)
        if plan is not None:
            used.update(cluster)
            plans.append(plan)
    return plans, waiting


def _joining(
    eng: Engram,
    rows: list[int],
    mems: dict[str, Memory],
    terms: dict[int, frozenset[str]],
    vecs: np.ndarray,
    anchors: list[Memory],
    threshold: float,
) -> dict[int, str]:
    """{row: gist id} of the rows that join a gist: alike to it or to one of its members still
    stored, and saying one of its lines (its question aside: what it shares is what they share);
    the nearest such gist when several are."""
    idx = eng.index
    best: dict[int, str] = {}
    for g in anchors:
        refs = [g.id] + [i for i in g.metadata["gist"]["sources"] if i in idx.row_of and idx.alive[idx.row_of[i]]]
        ref_rows = np.array([idx.row_of[i] for i in refs])
        ref_terms = [_terms(idx.texts[r] or "") for r in ref_rows]
        said = {unit_key(line["text"]) for line in g.metadata["gist"]["lines"] if not line["text"].startswith("User:")}
        sims = vecs @ idx.vectors[ref_rows].T
        g_vec = idx.vectors[idx.row_of[g.id]]
        for k, r in enumerate(rows):
            close = np.flatnonzero(sims[k] >= threshold)
            if not any(len(terms[r] & ref_terms[j]) >= SHARED_TERMS for j in close):
                continue
            if not said & {unit_key(u) for u in units_of(mems[idx.ids[r]].content)}:
                continue
            if r not in best or float(vecs[k] @ g_vec) > float(vecs[k] @ idx.vectors[idx.row_of[best[r]]]):
                best[r] = g.id
    return best


def _span(dates: list[str]) -> tuple[str, str]:
    return min(dates)[:10], max(dates)[:10]


def _new_plan(kind: str, members: list[Memory]) -> dict | None:
    sessions = {m.session_id for m in members if m.session_id}
    dates = [m.created_at.isoformat() for m in members]
    text = compose(members, [], kind, sessions, _span(dates), len(members))
    if not text["lines"]:
        return None  # alike, but no sentence, command or path said twice: nothing to state
    meta = _meta(kind, [m.id for m in members], sessions, dates, text["lines"])
    return {"action": "new", "gist_id": None, "kind": kind, "members": members, "gist": None, **text, "meta": meta}


def _update_plan(eng: Engram, kind: str, gist: Memory, new: list[Memory]) -> dict:
    old = gist.metadata["gist"]
    stored = eng.store_db.get_memories(old["sources"])
    sessions = set(old["sessions"]) | {m.session_id for m in new if m.session_id}
    dates = [old["first"], old["last"], *(m.created_at.isoformat() for m in new)]
    # What the sources no longer stored said is known from the lines they were counted in.
    carried = [{**line, "sources": [i for i in line["sources"] if i not in stored]} for line in old["lines"]]
    ids = list(dict.fromkeys([*old["sources"], *(m.id for m in new)]))
    text = compose([*stored.values(), *new], carried, kind, sessions, _span(dates), len(ids))
    meta = _meta(kind, ids, sessions, dates, text["lines"])
    return {"action": "update", "gist_id": gist.id, "kind": kind, "members": new, "gist": gist, **text, "meta": meta}


def _meta(kind: str, ids: list[str], sessions: set[str], dates: list[str], lines: list[dict]) -> dict:
    return {
        "kind": kind,
        "sources": ids,
        "sessions": sorted(sessions),
        "first": min(dates),
        "last": max(dates),
        "lines": lines,
    }


# -- writing --------------------------------------------------------------------------------------
def apply_gists(eng: Engram, plans: list[dict], now: datetime, gone: set[str]) -> list[str]:
    """Write the planned gists, move their new members to the working tier (those in `gone`,
    pruned by this run, are not written to) and delete the gists others absorbed (each plan's
    `absorbed`: what they said is in the absorbing gist's lines and history); returns the ids of
    the gists written or updated."""
    if not plans:
        return []
    db, idx = eng.store_db, eng.index
    if eng.settings.gist_command:
        for p in plans:
            _summarise(eng, p)
    vecs = eng.embedder.embed_batch([p["content"] for p in plans])
    written: list[tuple[Memory, np.ndarray]] = []
    faded: list[Memory] = []
    with db.transaction():
        for p, vec in zip(plans, vecs):
            members: list[Memory] = p["members"]
            touched = max([m.last_recalled_at or m.created_at for m in members], default=now)
            added = sum(base_stability(m) for m in members)
            ids = [m.id for m in members]
            g: Memory | None = p["gist"]
            if g is None:
                seed = members[0]
                gist = Memory(
                    id=new_id(),
                    content=p["content"],
                    memory_type=KINDS[p["kind"]],
                    importance=max(m.importance for m in members),
                    recall_count=0,
                    created_at=now,
                    last_recalled_at=touched,
                    user_id=seed.user_id,
                    tags=(GIST_TAG, f"{GIST_TAG}:{p['kind']}"),
                    metadata={"gist": p["meta"]},
                    provenance=tuple(ids),
                    status="active",
                    valid_from=now,
                    updated_at=now,
                    stability=min(MAX_STABILITY, added),
                    project=seed.project,
                    tier="semantic",
                )
                db.insert_memory(gist, vec)
            else:
                last = g.last_recalled_at or g.created_at
                gist = replace(
                    g,
                    content=p["content"],
                    importance=max([g.importance, *(m.importance for m in members)]),
                    last_recalled_at=max(touched, last) if members else last,
                    metadata={**g.metadata, "gist": p["meta"]},
                    provenance=tuple(dict.fromkeys([*g.provenance, *ids])),
                    stability=min(MAX_STABILITY, base_stability(g) + added),
                    updated_at=now,
                )
                db.update_memory(
                    g.id,
                    embedding=vec,
                    content=gist.content,
                    importance=gist.importance,
                    last_recalled_at=gist.last_recalled_at,
                    metadata=gist.metadata,
                    provenance=gist.provenance,
                    stability=gist.stability,
                    updated_at=now,
                )
            # The history names the sources as a consolidation's (engram memory_history lists them).
            event: dict[str, Any] = {"sources": ids, "gist": True}
            if p.get("absorbed"):
                event["merged"] = p["absorbed"]  # the gists it absorbed, deleted below
            db.add_event(gist.id, now, "consolidate", event)
            written.append((gist, vec))
            for m in members:
                if m.id in gone or m.tier == "working" or m.pinned or (m.metadata or {}).get("captured") == "kept":
                    continue
                db.update_memory(m.id, tier="working", updated_at=now)
                db.add_event(m.id, now, "tier", {"from": m.tier, "to": "working", "by": "gist", "gist": gist.id})
                faded.append(replace(m, tier="working", updated_at=now))
    for gist, vec in written:
        idx.upsert(gist, vec)
    for m in faded:
        idx.upsert(m, None)
    absorbed = [i for p in plans for i in p.get("absorbed", []) if i not in gone]
    if absorbed:
        eng.remove_memories(absorbed)
    return [g.id for g, _ in written]


def _summarise(eng: Engram, plan: dict) -> None:
    """ENGRAM_GIST_COMMAND's text for a planned gist, in place of the extractive one, which stays in
    its metadata (`extractive`, checked by trace) with the command (`summarised_by`). A command that
    fails, times out or prints nothing leaves the extractive text: maintenance goes on."""
    command = str(eng.settings.gist_command)
    try:
        done = subprocess.run(
            shlex.split(command),
            input=plan["content"],
            capture_output=True,
            text=True,
            timeout=SUMMARISER_TIMEOUT_S,
            check=False,
        )
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        log.warning("gist command %r failed: %s", command, e)
        return
    text = done.stdout.strip()
    if done.returncode != 0 or not text:
        log.warning("gist command %r exited %s with %d characters", command, done.returncode, len(text))
        return
    plan["meta"] = {**plan["meta"], "extractive": plan["content"], "summarised_by": command}
    plan["content"] = eng.redact(text[: eng.settings.max_content_chars])


def report_entry(p: dict, into: str | None) -> dict:
    """A gist in maintenance's report (the dry run's list of what would be written)."""
    return {
        "action": p["action"],
        "into": into,
        "kind": p["kind"],
        "new_sources": [m.id for m in p["members"]],
        "absorbed": list(p.get("absorbed", [])),
        "sources": len(p["meta"]["sources"]),
        "sessions": len(p["meta"]["sessions"]),
        "preview": p["content"],
    }
