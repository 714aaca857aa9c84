"""Gists (docs/lifecycle.md#gists): what several captured memories of one project share, written
once, without a model.

Maintenance looks at the captured memories that recur: episodes (a turn's request and answer),
failures (pitfalls) and handoffs. Within one user, one project and one kind, two of them are alike
when their vectors are within ENGRAM_GIST_THRESHOLD and their texts share at least SHARED_TERMS
content words. The memory alike to the most others (the seed) with its alike peers, at least
MIN_MEMBERS of them from at least MIN_SESSIONS sessions, is a cluster, and becomes one gist: a
`fact` (a `failure` for failures) of the semantic tier tagged `gist`, whose lines are the sentences,
commands (`code`) and file paths that half its members or more say, each copied verbatim from one of
them, with how many members say it (and an episode's first request), under a header that counts its
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
the member's, and no second gist is written. A run that finds no new member changes no gist. What
may still recur is spared by the prune meanwhile (plan_gists: WINDOW_DAYS, PENDING_DAYS).
"""

from __future__ import annotations

import logging
import math
import re
import shlex
import subprocess
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from engram.core.ids import new_id
from engram.core.redaction import REDACTED
from engram.core.types import MEMORY_TYPES, Memory
from engram.search.decay import MAX_STABILITY, base_stability
from engram.search.memory_index import to_days
from engram.text.statements import sentences
from engram.text.tokens import tokenize

if TYPE_CHECKING:
    from engram.engram import Engram

log = logging.getLogger(__name__)

GIST_TAG = "gist"
# The kinds of captured memory that gist, each among its own kind; what type the gist is.
KINDS = {"episode": "fact", "failure": "failure", "handoff": "fact"}
MIN_MEMBERS = 3
MIN_SESSIONS = 2
SHARED_TERMS = 3  # content words two alike memories have in common, beside their vectors' similarity
MAX_LINES = 12
MAX_LINE_CHARS = 400
# How long the prune spares what may recur before a gist holds it: a captured memory from its
# creation, two alike ones from two sessions from the newer one's.
WINDOW_DAYS = 14
PENDING_DAYS = 30
SUMMARISER_TIMEOUT_S = 30
HEADER = re.compile(r"\AGist of (\d+) (\w+) in (\d+) sessions?, (\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2}):\Z")
LINE = re.compile(r"\A- (.+) \((\d+) of (\d+)\)\Z")
_CODE = re.compile(r"`([^`\n]{3,300})`")
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|js|ts|tsx|go|rs|rb|java|toml|yaml|yml|json|md|sql|sh|cfg|ini))(?::\d+)?\b"
)


def plan_gists(eng: Engram, mine: np.ndarray, now: datetime) -> tuple[list[dict[str, Any]], set[str]]:
    """What this run would write, and the recurrences in progress.

    The plans: a new gist per new cluster, an update per gist with new members, each {action:
    new | update, gist_id, kind, members: [Memory], gist: Memory | None, content, lines, meta}.
    The recurrences in progress, which the prune spares: the ids of captured memories younger than
    WINDOW_DAYS in no gist, and of alike memories from two sessions or more, too few yet for a
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
        for (user, project), members in sorted(groups.items()):
            anchors = [
                g for g in kind_gists if idx.user[idx.row_of[g.id]] == user and idx.project[idx.row_of[g.id]] == project
            ]
            found, waiting = _plan_group(eng, kind, members, anchors, s.gist_threshold)
            plans += found
            for few in waiting:
                if (now - max(m.created_at for m in few)).days < PENDING_DAYS:
                    pending.update(m.id for m in few)
            # One alone may be the first of a recurrence: it waits WINDOW_DAYS for the next.
            placed = {m.id for p in found for m in p["members"]}
            young = [r for r in members if to_days(now) - idx.created[r] < WINDOW_DAYS]
            pending.update(idx.ids[r] for r in young if idx.ids[r] not in placed)
    return plans, pending


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


# -- the text ---------------------------------------------------------------------------------------
def units_of(text: str) -> list[str]:
    """What a member says that a gist may repeat, each a verbatim piece of `text`: its sentences
    of at least three content words, the commands in backticks and the file paths it names; none
    with a redacted secret."""
    out: list[str] = []
    for line in text.splitlines():
        # A turn's answer is labelled "Assistant:" (engram.workflows.capture): the sentence is the rest.
        out += [p.strip().removeprefix("Assistant:").strip() for p in sentences(line) if len(tokenize(p)) >= 3]
    out += [m.group(1).strip() for m in _CODE.finditer(text)]
    out += [m.group(0) for m in _PATH.finditer(text)]
    return [u for u in dict.fromkeys(out) if 3 <= len(u) <= MAX_LINE_CHARS and REDACTED not in u and u in text]


def request_of(m: Memory) -> str | None:
    """An episode's request as a unit (its first sentence, "User: ..."): what the gist was asked."""
    first = units_of(m.content.splitlines()[0]) if m.content.strip() else []
    return first[0] if first and first[0].startswith("User:") else None


def unit_key(unit: str) -> tuple[str, ...] | str:
    """Two members say the same thing when their units have the same content words in order (a
    sentence), or the same text (a command, a path: every character matters)."""
    words = tuple(tokenize(unit))
    return words if len(words) >= 3 else " ".join(unit.split())


def compose(
    members: list[Memory], carried: list[dict], kind: str, sessions: set[str], span: tuple[str, str], total: int
) -> dict:
    """The gist's lines and text: the units of `members` (and of `carried` lines, whose sources no
    longer stored still count) that half the sources or more say (two at least), the most said
    first; for episodes,
    the earliest request too when no shared line is one (what the gist answers). `total`: the
    gist's sources, stored or not. Returns {content, lines}."""
    live = {m.id for m in members}
    found: dict[Any, dict] = {}
    for m in sorted(members, key=lambda m: (m.created_at, m.id)):
        for u in units_of(m.content):
            entry = found.setdefault(unit_key(u), {"text": u, "sources": []})
            if m.id not in entry["sources"]:
                entry["sources"].append(m.id)
    for line in carried:
        entry = found.setdefault(unit_key(line["text"]), {"text": line["text"], "sources": []})
        entry["sources"] += [i for i in line["sources"] if i not in live and i not in entry["sources"]]
    # What most members do not say is not what they share: a line needs half of them (two at least).
    shared = [e for e in found.values() if len(e["sources"]) >= max(2, math.ceil(total / 2))]
    shared.sort(key=lambda e: -len(e["sources"]))  # a stable sort: the earlier said first among equals
    if kind == "episode" and not any(e["text"].startswith("User:") for e in shared):
        asked = [line["text"] for line in carried if line["text"].startswith("User:")]
        asked += [r for m in sorted(members, key=lambda m: (m.created_at, m.id)) for r in [request_of(m)] if r]
        if asked and shared:
            shared.insert(0, found[unit_key(asked[0])])
    lines: list[dict] = []
    for e in shared:
        if any(e["text"] in kept["text"] for kept in lines):
            continue  # a path or command inside a sentence already kept
        lines.append({"text": e["text"], "sources": e["sources"]})
        if len(lines) == MAX_LINES:
            break
    noun = {"episode": "episodes", "failure": "failures", "handoff": "handoffs"}[kind]
    plural = "s" if len(sessions) != 1 else ""
    head = f"Gist of {total} {noun} in {len(sessions)} session{plural}, {span[0]}..{span[1]}:"
    body = [f"- {x['text']} ({len(x['sources'])} of {total})" for x in lines]
    return {"content": "\n".join([head, *body]), "lines": lines}


def trace(content: str, meta: dict, source_text: dict[str, str]) -> list[str]:
    """What in a gist cannot be traced to its sources (empty: every line can): each line of its
    extractive text (its content unless a command rewrote it) must be
    the verbatim text of a unit said by each source it names (as `source_text` has them: the ids
    of sources no longer stored are skipped), its count theirs, its header the metadata's."""
    problems = []
    # A gist ENGRAM_GIST_COMMAND rewrote is checked by the extractive text it was given.
    head, *body = meta.get("extractive", content).splitlines()
    h = HEADER.match(head)
    if h is None or int(h.group(1)) != len(meta["sources"]) or int(h.group(3)) != len(meta["sessions"]):
        problems.append(f"header {head!r} does not count the gist's sources and sessions")
    if len(body) != len(meta["lines"]):
        problems.append("the lines are not the metadata's")
    for text, line in zip(body, meta["lines"]):
        m = LINE.match(text)
        if (
            m is None
            or m.group(1) != line["text"]
            or int(m.group(2)) != len(line["sources"])
            or int(m.group(3)) != len(meta["sources"])
        ):
            problems.append(f"line {text!r} is not its metadata's")
            continue
        key = unit_key(line["text"])
        for sid in line["sources"]:
            src = source_text.get(sid)
            if src is not None and not any(unit_key(u) == key for u in units_of(src)):
                problems.append(f"line {text!r}: source {sid} does not say it")
        stored = [source_text[sid] for sid in line["sources"] if sid in source_text]
        if stored and not any(line["text"] in src for src in stored):
            problems.append(f"line {text!r} is in none of its sources verbatim")
    return problems


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
    """Write the planned gists and move their new members to the working tier (those in `gone`,
    pruned by this run, are not written to); returns the ids of the gists written or updated."""
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
            touched = max(m.last_recalled_at or m.created_at for m in members)
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
                gist = replace(
                    g,
                    content=p["content"],
                    importance=max(g.importance, *(m.importance for m in members)),
                    last_recalled_at=max(touched, g.last_recalled_at or g.created_at),
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
            db.add_event(gist.id, now, "consolidate", {"sources": ids, "gist": True})
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
        "sources": len(p["meta"]["sources"]),
        "sessions": len(p["meta"]["sessions"]),
        "preview": p["content"],
    }
