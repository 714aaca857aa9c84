"""The readable text of each command's result (--json prints the result itself)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from engram.cli import render_lifecycle as life
from engram.ops import dumps


def _plain(value: Any, indent: int = 0) -> list[str]:
    """Readable nested key: value lines for results without a dedicated renderer."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                lines.append(f"{pad}{k}:")
                lines.extend(_plain(v, indent + 1))
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
        return lines
    if isinstance(value, list):
        lines = []
        for v in value:
            if isinstance(v, dict | list):
                sub = _plain(v, indent + 1)
                lines.append(f"{pad}- {sub[0].strip()}" if sub else f"{pad}-")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_scalar(v)}")
        return lines
    return [f"{pad}{_scalar(value)}"]


def _scalar(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | dict):
        return "none" if not v else json.dumps(v)
    return str(v)


def _day(iso: str | None) -> str:
    return (iso or "")[:10]


def _indent(text: str, pad: str) -> str:
    """A multi-line memory (a handoff) with its later lines under the entry, not at column 0."""
    return text.replace("\n", "\n" + pad)


def _render_store(r: dict) -> str:
    line = f"{r['action']}: {r['memory_id']} [{r['memory_type']}] {r['content']}"
    return line + (f"\n  ({r['reason']})" if r.get("reason") else "")


def _render_recall(r: dict) -> str:
    lines = []
    for s in r.get("interrupted_sessions") or []:
        task = (s.get("task") or {}).get("name") or "no task"
        lines.append(
            f"! interrupted session {s['session_id']} ({s.get('client') or '?'}, {task}), "
            f"last seen {_day(s.get('last_heartbeat'))}"
        )
    if r.get("read_as"):
        lines.append("searched " + ", ".join(f"{w!r} as {' or '.join(cs)}" for w, cs in r["read_as"].items()))
    if not r["memories"]:
        lines.append("no memories found")
    for i, m in enumerate(r["memories"], 1):
        pin = " (latest handoff)" if m.get("pinned") else ""
        if "line" in m:  # --compact: one line each; `engram show ID` gives the full text
            lines.append(f"{i:>2}. {m['id']}  [{m['memory_type']}] {m['when']}  {m['tokens']} tokens  {m['line']}{pin}")
            continue
        lines.append(f"{i:>2}. [{m['memory_type']}] {_indent(m['content'], '    ')}{pin}")
        lines.append(f"    id {m['id']}  score {m['score']:.3f}  {_day(m.get('created_at'))}  {_where(m)}")
        if s := m.get("shared_by"):  # a teammate's memory, read from the project's shared records
            lines.append(f"    shared by {s['by']} from {s['machine']} on {_day(s['at'])}")
        if m.get("confidence"):  # strong: rely on it; weak: only plausibly related (docs/ranking.md)
            lines.append(f"    {m['confidence']}: {m.get('evidence') or ''}".rstrip(": "))
        if m.get("explain"):
            lines.append(f"    explain: {json.dumps(m['explain'])}")
    for f in r.get("related_failures") or []:
        label = f"pitfall [{f['component']}]" if f.get("component") else "pitfall"
        lines.append(f"{label}: {f.get('content', f.get('line', ''))}")
    return "\n".join(lines)


def _render_forget(r: dict) -> str:
    ids = r["would_delete"] if r["dry_run"] else r["deleted"]
    verb = "would delete" if r["dry_run"] else "deleted"
    return f"{verb} {r['count']} memor{'y' if r['count'] == 1 else 'ies'}" + "".join(f"\n  {i}" for i in ids)


def _where(row: dict) -> str:
    """Which project a memory or task belongs to, as the CLI prints it."""
    return f"project {row['project']}" if row.get("project") else "global"


def _task_line(t: dict) -> str:
    goal = f" - {t['goal']}" if t.get("goal") else ""
    return f"{t['id']}  [{t['status']}]  {t['name']}{goal}  ({_where(t)})"


def _render_task_view(r: dict) -> str:
    lines = [_task_line(r["task"]), *_held_line(r)]
    for e in r.get("timeline") or []:
        lines.append(f"  {_day(e['created_at'])} [{e['memory_type']}] {_indent(e['content'], '    ')}")
    h = r.get("latest_handoff")
    if h:
        lines.append(f"latest handoff ({_day(h['created_at'])}): {h.get('summary', '')}")
        for v in h.get("next_steps_validation") or []:
            lines.append(f"  next: {v.get('step')} [{v.get('status')}]")
    if r.get("plan"):
        lines.append("plan:")
        lines.extend(_plan_lines(r["plan"]))
    return "\n".join(lines)


def _held_line(t: dict) -> list[str]:
    from engram.continuity.claims import describe_claim

    held = t.get("held_by")
    return (
        [f"    held by {describe_claim(held)}" + (" (this session)" if held.get("this_session") else "")]
        if held
        else []
    )


def _render_claim(r: dict) -> str:
    from engram.continuity.claims import describe_claim

    line = f"claimed {r['claim']['task_id']} for {describe_claim(r['claim'])}"
    if r.get("taken_over"):
        line += f"\n  taken over from {describe_claim(r['taken_over'])} (it is told on its next call)"
    return line


def _render_tasks(r: dict) -> str:
    lines = []
    for t in r["tasks"]:
        lines.append(_task_line(t))
        lines.extend(_held_line(t))
        if t.get("last_activity"):
            la = t["last_activity"]
            lines.append(f"    last: {_day(la['at'])} [{la['memory_type']}] {_indent(la['content'][:100], '      ')}")
    return "\n".join(lines) or "no tasks"


def _render_projects(r: dict) -> str:
    lines = [
        f"{'*' if p['id'] == r.get('current') else ' '} {p['id']}  "
        f"{p['memories']} memor{'y' if p['memories'] == 1 else 'ies'}, "
        f"{p['tasks']} task{'' if p['tasks'] == 1 else 's'}"
        for p in r["projects"]
    ]
    if r.get("current") and all(p["id"] != r["current"] for p in r["projects"]):
        lines.append(f"* {r['current']}  (this directory's; nothing stored yet)")
    return "\n".join(lines) or "no project holds anything yet (every row is global)"


def _plan_lines(plan: list[dict]) -> list[str]:
    return [
        f"  [{e['status']}] {e['step']}"
        + (f"  <- {e['evidence']['kind']}: {e['evidence']['text'][:80]}" if e.get("evidence") else "")
        for e in plan
    ]


def _render_handoff(r: dict) -> str:
    return f"handoff saved: {r['handoff_id']}" + (f" (task {r['task_id']})" if r.get("task_id") else "")


def _bytes(n: Any) -> str:
    if not isinstance(n, int | float):
        return "-"
    for unit in ("bytes", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _when(iso: Any) -> str:
    """An ISO time as 'YYYY-MM-DD HH:MM UTC' (naive times are UTC, as the daemon writes them)."""
    if not iso:
        return "never"
    try:
        when = datetime.fromisoformat(str(iso))
    except ValueError:
        return str(iso)
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _late(late: dict) -> str:
    """The stats line of the late-interaction stage (docs/ranking.md, "Late interaction")."""
    turns, read = late.get("turns", 0), late.get("turns_read", 0)
    if not late.get("on"):
        return f"off (ENGRAM_LATE_INTERACTION=0); {turns:,} turns of a conversation"
    if not turns:
        return "on; no turns of a conversation yet (it reads only those)"
    left = f", {turns - read:,} to fill in the background" if read < turns else ""
    return f"on; {read:,} of {turns:,} turns read (token vectors kept){left}"


def _counts(d: Any) -> str:
    if not isinstance(d, dict) or not d:
        return "none"
    return ", ".join(f"{k.replace('_', ' ')} {_scalar(v)}" for k, v in d.items())


def _table(rows: list[tuple[str, str]]) -> str:
    """Label and value columns, labels padded to the longest."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" if k else f"{'':<{width}}  {v}" for k, v in rows)


def _render_stats(r: dict) -> str:
    r = dict(r)
    rows: list[tuple[str, str]] = []
    by_type = r.pop("by_type", {})
    by_status = r.pop("by_status", {})
    active = by_status.get("active", 0) if isinstance(by_status, dict) else 0
    rows.append(("memories", f"{active:,} active of {r.pop('total', 0):,}"))
    rows.append(("", f"by type: {_counts(by_type)}"))
    rows.append(("", f"by status: {_counts(by_status)}"))
    rows += life.lifecycle_rows(r)
    users = r.pop("by_user", {})
    if users:
        rows.append(("users", _counts(users)))
    st = r.pop("strength", None)
    if isinstance(st, dict):
        mean = st.get("mean")
        rows.append(("strength", f"mean {mean:.2f}" if isinstance(mean, float) else "mean -"))
        rows.append(("", f"buckets: {_counts(st.get('buckets'))} (pruned below {_scalar(st.get('prune_threshold'))})"))
    fading = r.pop("fading_soon", None)
    if isinstance(fading, dict):
        rows.append(
            (
                "fading soon",
                f"{fading.get('count', 0)} within {fading.get('within_days')} days "
                f"(strength below {_scalar(fading.get('below'))})",
            )
        )
        for m in fading.get("memories") or []:
            rows.append(("", f"{m['id']} [{life.kind_of(m)}] {m['days_until_prune']:g} d left: {m['content']}"))
    captured = r.pop("captured", None)
    if isinstance(captured, dict):
        rows.append(("captured", f"automatically, without a model: {_counts(captured)}"))
    rows.append(("tasks", _counts(r.pop("tasks", {}))))
    rows.append(("sessions", _counts(r.pop("sessions", {}))))
    idx = r.pop("index", None)
    if isinstance(idx, dict):
        fresh = "fresh" if idx.get("fresh") else "stale: run `engram reindex`"
        waiting = idx.get("awaiting_embedding") or 0
        line = f"{idx.get('rows', 0):,} of {idx.get('table_rows', 0):,} rows indexed ({fresh}), "
        line += f"{idx.get('graph_edges', 0):,} graph edges, built {_when(idx.get('built_at'))}"
        line += f"; {waiting:,} await their embedding (found by words meanwhile)" if waiting else ""
        rows.append(("index", line))
    late = r.pop("late_interaction", None)
    if isinstance(late, dict):
        rows.append(("late reader", _late(late)))
    m = r.pop("maintenance", None)
    if isinstance(m, dict):
        rows.append(
            (
                "maintenance",
                f"every {m.get('interval_hours', 0):g} h, next {_when(m.get('next_run'))}, "
                f"last {_when(m.get('last_run'))}",
            )
        )
        rows.append(
            (
                "",
                f"{m.get('runs', 0)} runs since the daemon started, {m.get('errors', 0)} errors"
                + (f" (last: {m['last_error']})" if m.get("last_error") else ""),
            )
        )
    t = r.pop("totals", None)
    if isinstance(t, dict):
        rows.append(
            (
                "all time",
                f"{t.get('runs', 0):,} maintenance runs, {t.get('consolidated', 0):,} "
                f"consolidated, {t.get('pruned', 0):,} pruned, last {_when(t.get('last_run'))}",
            )
        )
    rows.append(("disk", _bytes(r.pop("disk_bytes", None))))
    model = r.pop("model", None)
    if isinstance(model, dict):
        rows.append(("model", f"{model.get('name')} ({model.get('dim')} dims, {model.get('backend') or '-'})"))
    out = _table(rows)
    return out + ("\n" + "\n".join(_plain(r)) if r else "")  # fields added later, as key: value


def _render_consolidate(r: dict) -> str:
    r = dict(r)
    clusters = r.pop("clusters", []) or []
    n = r.pop("consolidated", 0)
    verb = "merged" if r.get("applied") else "would merge"
    rows: list[tuple[str, str]] = [
        (
            "consolidate",
            f"{verb} {n} memor{'y' if n == 1 else 'ies'} "
            f"into {len(clusters)} cluster{'' if len(clusters) == 1 else 's'}",
        )
    ]
    for i, c in enumerate(clusters, 1):
        into = f" -> {c['into']}" if c.get("into") else ""
        rows.append(("", f"{i}. {len(c.get('sources') or [])} memories{into}: {c.get('preview', '')}"))
    rows += life.gist_rows(r)
    pruned = r.pop("pruned", 0)
    rows.append(
        (
            "prune",
            f"{'pruned' if r.get('applied') else 'would prune'} {pruned} ({_counts(r.pop('pruned_by_reason', {}))})",
        )
    )
    rows += [("", mid) for mid in r.pop("pruned_ids", []) or []]
    rows.append(("protected", f"{r.pop('protected', 0)} kept although faded (pinned, open task, latest handoff)"))
    rows.append(("edges", f"{r.pop('edges_refreshed', 0)} refreshed"))
    rows.append(("compacted", "yes" if r.pop("compacted", False) else "no"))
    if "token_vectors_filled" in r:  # the late-interaction stage's turns written without them
        rows.append(("token vectors", f"{r.pop('token_vectors_filled')} filled in"))
    took = r.pop("duration_s", None)
    rows.append(("took", f"{took * 1000:,.0f} ms" if isinstance(took, int | float) else "-"))
    for k in ("applied", "user_id", "started_at", "finished_at"):
        r.pop(k, None)
    out = _table(rows)
    return out + ("\n" + "\n".join(_plain(r)) if r else "")


def _render_import_from(r: dict) -> str:
    head = "would store" if r["dry_run"] else "stored"
    actions = ", ".join(f"{k} {v}" for k, v in sorted(r["actions"].items())) or "nothing new"
    lines = [
        f"{r['source']} {r['path']}: {r['found']} found, {r['skipped']} imported before; "
        f"{head} {r['stored']} ({actions})"
    ]
    for it in r["items"]:
        target = f" -> {it['target_id']}" if it.get("target_id") else ""
        tags = f" #{' #'.join(it['tags'])}" if it["tags"] else ""
        lines.append(f"  {it['action']:<9}{target} {it['content']}{tags}")
        if it["action"] != "new" and it.get("reason"):
            lines.append(f"  {'':<9} ({it['reason']})")
    return "\n".join(lines)


def _render_new_key(r: dict) -> str:
    label = f" ({r['label']})" if r.get("label") else ""
    return (
        f"key {r['key_id']} for user {r['user_id']}{label}:\n{r['key']}\n"
        "It is shown this once (only its hash is kept): give it to its holder now. "
        "Clients send it as 'Authorization: Bearer <key>'."
    )


def _render_migrate(r: dict) -> str:
    rows = [
        ("from", r["source"]),
        ("to", r["target"]),
        ("copied", _counts(r["copied"]) + (f" (skipped {r['skipped']} ids it had)" if r["skipped"] else "")),
    ]
    rows.append(("meta", ", ".join(r["meta"]) or "none"))
    rec = r["verified"]["recalls"]
    rows.append(
        (
            "verified",
            f"row counts {r['verified']['counts']}; "
            + (
                f"{rec['same']} of {rec['sampled']} sample recalls return the same top {rec['top']} ids"
                if rec is not None
                else "sample recalls not compared (the target held rows before)"
            ),
        )
    )
    return _table(rows)


def _render_backup(r: dict) -> str:
    return _table(
        [
            ("backup", r["path"]),
            ("size", _bytes(r["bytes"])),
            ("schema", f"v{r['schema_version']}"),
            ("checked", _counts(r["counts"])),
            ("took", f"{r['seconds']:g} s"),
        ]
    )


def _render_scrub(r: dict) -> str:
    counts = ", ".join(f"{r[k]} {k}" for k in ("memories", "events", "tasks", "sessions"))
    lines = [f"{'rewritten' if r['applied'] else 'would rewrite'}: {counts}"]
    lines += [
        f"  {c['kind']} {c['id']}: {', '.join(c['fields'])}" + (f"  {c['preview']}" if c.get("preview") else "")
        for c in r["changes"]
    ]
    if r["backup"]:
        lines.append(f"the store as it was (secrets included; delete it once checked): {r['backup']}")
    elif not r["applied"] and any(r[k] for k in ("memories", "events", "tasks", "sessions")):
        lines.append("nothing changed: run `engram scrub --apply` to rewrite them (a copy is kept first)")
    return "\n".join(lines)


def _render_restore(r: dict) -> str:
    rows = [
        ("restored", f"{r['path']} -> {r['restored_to']}"),
        ("schema", f"v{r['schema_version']}"),
        ("checked", _counts(r["counts"])),
    ]
    if r["previous"]:
        rows.append(("previous file kept", r["previous"]))
    return _table(rows)


def _render_keys(r: dict) -> str:
    rows = [
        f"{k['key_id']}  {k['user_id']}  {k['label'] or '-'}  created {_when(k['created_at'])}  "
        + (f"revoked {_when(k['revoked_at'])}" if k["revoked_at"] else "active")
        for k in r["keys"]
    ]
    return "\n".join(rows) or "no keys"


def _render_memory(r: dict) -> str:
    head = f"{r['id']} [{life.kind_of(r)}] {_day(r.get('created_at'))}  {_where(r)}"
    lines = [head, *life.expiry_lines(r), r["content"]]
    if r.get("around"):
        lines.append("in its session:")
        lines += [
            f"  {'>' if a['position'] == 0 else ' '} {a['position']:+d} {a['id']} [{a['memory_type']}] "
            f"{a['when']}  {a['line']}"
            for a in r["around"]
        ]
    return "\n".join(lines)


RENDER: dict[str, Callable[[dict], str]] = {
    "get_memory": _render_memory,
    "store_memory": _render_store,
    "recall_memory": _render_recall,
    "get_context": lambda r: r["context"],
    "forget_memory": _render_forget,
    "keep_memory": life.render_keep,
    "set_tier": life.render_set_tier,
    "create_task": _task_line,
    "update_task": _task_line,
    "get_task": _render_task_view,
    "list_tasks": _render_tasks,
    "list_projects": _render_projects,
    "session_handoff": _render_handoff,
    "resume_task": lambda r: r["context"],
    "claim_task": _render_claim,
    "release_task": lambda r: (
        f"released {r['task_id']}"
        if r["released"]
        else f"{r['task_id']} was not held by this session: nothing to release"
    ),
    "memory_prompt": lambda r: r["prompt"].rstrip("\n"),
    "track_progress": lambda r: f"progress saved: {r['memory_id']} {r['feature']} [{r['status']}]",
    "track_failure": _render_store,
    "session_outcome": lambda r: f"session {r['session_id']}: {r['outcome']}",
    "memory_stats": _render_stats,
    "prune_memories": life.render_prune,
    "consolidate_memory": _render_consolidate,
    "import_from": _render_import_from,
    "migrate_store": _render_migrate,
    "backup_store": _render_backup,
    "scrub_store": _render_scrub,
    "restore": _render_restore,
    "create_key": _render_new_key,
    "list_keys": _render_keys,
    "revoke_key": lambda r: f"revoked key {r['key_id']} of user {r['user_id']} at {_when(r['revoked_at'])}",
}


def render(op: str, result: Any, as_json: bool) -> str:
    """The text printed for an operation's result: JSON, its renderer's text, or key: value lines."""
    if as_json:
        return dumps(result, indent=2, ensure_ascii=False)
    fn = RENDER.get(op)
    text = fn(result) if fn else "\n".join(_plain(result))
    if isinstance(result, dict):  # what claims tell the caller, whatever the command (engram.continuity.claims)
        said = [n["message"] for n in result.get("claim_notices") or []]
        claim = result.get("claim")
        if isinstance(claim, dict) and claim.get("claimed") is False:
            said.append(claim["message"])
        text += "".join(f"\n! {m}" for m in said)
    return text
