"""The texts the engine renders, pure functions of the answers they render: the <memory> block
(pack_context), the handoff's searchable text, the resume block, the prompt block's rules and tasks."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from engram.continuity.claims import describe_claim
from engram.core.types import Claim


def estimate_tokens(text: str) -> int:
    """About four characters per token for English text, as most tokenizers average."""
    return math.ceil(len(text) / 4)


def progress_text(doc: dict) -> str:
    """A progress snapshot as stored (and embedded): validation compares steps with this vector."""
    text = f"Progress on {doc['feature']}: {doc['status']} ({doc['completion']:.0%})"
    return text + (f". {doc['notes']}" if doc.get("notes") else "")


def render_handoff(doc: dict) -> str:
    """The handoff as searchable text. An automatic checkpoint's next steps are its whole plan (each
    step's status is kept beside them): a step already said done, in progress or blocked is not
    repeated as a next step."""
    lines = [f"Handoff: {doc['summary']}"]
    said: set[str] = set()
    for key, label in (
        ("completed", "Completed"),
        ("in_progress", "In progress"),
        ("blocked", "Blocked"),
        ("next_steps", "Next steps"),
    ):
        items = [x for x in doc.get(key) or [] if key != "next_steps" or x not in said]
        said.update(items)
        if items:
            lines.append(f"{label}: " + "; ".join(items))
    return "\n".join(lines)


def pack_sections(sections: Sequence[tuple[str, Sequence[str]]], max_tokens: int) -> str:
    """Section headings with their lines, in order, as many lines as fit the token budget.

    A line that does not fit is left out, not cut; a heading is kept only with a line under it.
    """
    out: list[str] = []
    used = 0
    for heading, lines in sections:
        pending = [heading] if heading else []
        for line in lines:
            cost = estimate_tokens("\n".join(pending + [line])) + (1 if out else 0)
            if used + cost > max_tokens:
                continue
            out.extend(pending + [line])
            used += cost
            pending = []
    return "\n".join(out)


def held(c: Claim | None, reader: str | None) -> dict | None:
    """A task's holder as the answers show it; this_session: the reading session holds it."""
    return None if c is None else {**c.to_dict(), "this_session": c.session_id == reader}


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{max(0, int(seconds))} s"


def render_resume(r: dict, max_tokens: int) -> str:
    """The resume_task text block: most needed first, so a small budget keeps what matters."""
    t = r["task"]
    head = [f"Task {t['id']}: {t['name']} [{t['status']}]"]
    if r.get("held_by"):
        mine = r["held_by"].get("this_session", False)
        head.append(
            "Held by: "
            + ("this session, " if mine else "")
            + describe_claim(r["held_by"])
            + ("" if mine else ". Another agent is working on it: do not do its work twice")
        )
    if r.get("claimed_elsewhere"):
        c = r["claimed_elsewhere"]
        head.append(
            f"Claimed on another machine: by {c['by']} on {c['machine']} ({c.get('client') or 'unknown client'}), "
            f"{_age(c['age_s'])} ago (advisory: check with them before doing the same work)"
        )
    if t.get("goal"):
        head.append(f"Goal: {t['goal']}")
    if r["latest_handoff"]:
        h = r["latest_handoff"]
        head.append(f"Latest handoff ({h['created_at'][:10]}): {h['summary']}")
    if r["next_step"]:
        head.append(f"Next step: {r['next_step']}")
    order = {"in_progress": 0, "not_started": 1, "unchecked": 1, "done": 2, "dropped": 3}
    plan = [
        f"- [{e['status']}] {e['step']}" + (f" (evidence: {e['evidence']['text']})" if e.get("evidence") else "")
        for e in sorted(r["plan"], key=lambda e: order[e["status"]])
    ]
    pitfalls = []
    for f in r["pitfalls"]:
        line = f"- [{f['component']}] {f['error']}" if f["component"] else f"- {f['error']}"
        if f.get("root_cause"):
            line += f"; root cause: {f['root_cause']}"
        if f.get("fix"):
            line += f"; fix: {f['fix']}"
        pitfalls.append(line)
    interrupted = []
    for s in r["interrupted_sessions"]:
        line = f"- session {s['session_id']} ({s['reason']}, {s['ended_at'][:16]})"
        if s.get("last_progress"):
            line += f", last progress: {s['last_progress']['content']}"
        interrupted.append(line)
    ws = r["working_set"]
    working = ([f"- files: {', '.join(ws['files'])}"] if ws["files"] else []) + (
        [f"- components: {', '.join(ws['components'])}"] if ws["components"] else []
    )
    closing = "\n</resume>"  # kept whatever the budget, so the block always ends
    return (
        pack_sections(
            [
                ("<resume>", head),
                ("Plan:", plan),
                ("In progress:", [f"- {x}" for x in r["in_progress"]]),
                ("Blocked:", [f"- {x}" for x in r["blocked"]]),
                ("Pitfalls (do not repeat):", pitfalls),
                ("Interrupted sessions:", interrupted),
                ("Keep (decisions and conventions):", [f"- {m['content']}" for m in r["keep"]]),
                ("Working set:", working),
            ],
            max_tokens - estimate_tokens(closing),
        )
        + closing
    )


def pack_context(r: dict, max_tokens: int) -> tuple[str, list[str]]:  # noqa: C901 - one budgeted pass over the sections in priority order
    """A recall_memory result as a <memory> text block within `max_tokens`, and the ids it holds.

    The handoff goes first, whole or not at all; then interrupted sessions, memories and pitfalls
    in rank order, each skipped when it does not fit (a shorter one further down may still fit).
    """
    lines, used, ids = ["<memory>"], 0, []
    budget = max_tokens - 4  # the <memory> tags
    h = r["handoff"]
    if h:
        block = [f"Latest handoff ({h['created_at'][:10]}): {h['summary']}"]
        steps = {s["step"]: s["status"] for s in h["next_steps_validation"]}
        for key in ("completed", "in_progress", "blocked"):
            if h.get(key):
                block.append(f"  {key.replace('_', ' ')}: " + "; ".join(h[key]))
        for step in h.get("next_steps", []):
            block.append(f"  next: {step} [{steps.get(step, 'not_started')}]")
        for e in h.get("open_steps", []):  # planned earlier, still open, not re-planned here
            if h["id"] not in e["planned_in"]:
                block.append(f"  still open from an earlier handoff: {e['step']} [{e['status']}]")
        text = "\n".join(block)
        if estimate_tokens(text) <= budget:
            lines.append(text)
            used += estimate_tokens(text)
            ids.append(h["id"])
    # Reported once (the next recall no longer has them): in the text too, or an agent that reads
    # only the block never learns that the last session was cut off mid-step.
    for s in r.get("interrupted_sessions") or []:
        line = (
            f"- interrupted session {s['session_id']} ({s.get('reason') or 'interrupted'}, "
            f"{(s.get('ended_at') or s.get('last_heartbeat') or '')[:16]})"
        )
        if (s.get("task") or {}).get("name"):
            line += f", task: {s['task']['name']}"
        if s.get("last_progress"):
            line += f", last progress: {s['last_progress']['content']}"
        t = estimate_tokens(line)
        if used + t <= budget:
            lines.append(line)
            used += t
    for m in r["memories"]:
        if m["id"] in ids:
            continue
        line = f"- ({m['created_at'][:10]}) [{m['memory_type']}] {m['content']}"
        t = estimate_tokens(line)
        if used + t > budget:
            continue
        lines.append(line)
        used += t
        ids.append(m["id"])
    for f in r["related_failures"]:
        if f["id"] in ids:  # already in the block as a memory: the budget is not spent twice on it
            continue
        # A failure stored with store_memory has no component: no empty brackets for it.
        line = f"- pitfall [{f['component']}]: {f['content']}" if f["component"] else f"- pitfall: {f['content']}"
        t = estimate_tokens(line)
        if used + t <= budget:
            lines.append(line)
            used += t
    lines.append("</memory>")
    return "\n".join(lines), ids


MEMORY_RULES = """\
## Memory (engram)
- At the start of every task, call recall_memory (or get_context) with what you are about to do.
  Read the pinned handoff, related_failures and interrupted_sessions before acting; resume
  interrupted work instead of restarting it.
- To continue a task, call resume_task(task_id) first (list_tasks shows the open ones): it gives
  the plan with each step done, in_progress, not_started or dropped, the next step, pitfalls
  and the working set. Do not redo a step marked done. A task held by another session
  (held_by) is being worked on: pick another unless the user asks you to take it over.
- For work that may span sessions, call create_task once and pass its task_id to every later call.
- Store durable knowledge with store_memory: decisions and why, conventions, user preferences,
  working commands. One self-contained fact per call; no secrets. If a recalled memory is wrong
  or outdated, fix it with update_memory instead of storing a contradicting one.
- Call track_progress when a step starts, finishes or gets blocked.
- Call track_failure for every error or dead end worth not repeating (with root_cause and fix).
- Before ending a session or when context runs low, call session_handoff with summary,
  completed, in_progress, blocked and concrete next_steps; then session_outcome(success|failure).
  If you are about to be cut off (context overflow, rate limit, the user stopping you), call
  report_interruption(reason, task_id) after the handoff.
"""


def render_prompt(tasks: Sequence[dict], open_steps: Callable[[dict], Sequence[dict]]) -> str:
    """The memory rules, then the open tasks (from list_tasks), each with its open steps."""
    lines = [MEMORY_RULES.rstrip()]
    if tasks:
        lines += ["", "### Open tasks (engram)", "Resume one with resume_task(task_id) before working on it."]
        for t in tasks:
            held_by = f"; held by {describe_claim(t['held_by'])}" if t["held_by"] else ""
            lines.append(
                f"- {t['id']} [{t['status']}] {t['name']} (last activity {t['last_activity_at'][:10]}{held_by})"
            )
            for e in open_steps(t):
                lines.append(f"  - next: {e['step']} [{e['status']}]")
    return "\n".join(lines) + "\n"
