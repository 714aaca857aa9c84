"""The text of the lifecycle's results (docs/lifecycle.md): tiers and expiry in `engram stats`
and `engram show`, `engram tier`, `engram keep`, `engram prune --keep`, `engram doctor`."""

from __future__ import annotations


def kind_of(m: dict) -> str:
    """A memory's type, and its tier when the result has one."""
    return f"{m['memory_type']}, {m['tier']}" if m.get("tier") else m["memory_type"]


def expiry_lines(m: dict) -> list[str]:
    """What `engram show` says of a memory's expiry."""
    if m.get("expired"):
        return [f"EXPIRED at {m['expires_at']}: no longer returned; maintenance removes it"]
    return [f"expires {m['expires_at']}"] if m.get("expires_at") else []


def lifecycle_rows(r: dict) -> list[tuple[str, str]]:
    """The stats table's tier and expiry rows, taking their fields out of `r`."""
    rows = gist_rows(r)
    by_tier = r.pop("by_tier", None)
    factors = r.pop("tier_factors", None) or {}
    if isinstance(by_tier, dict):
        tiers = ", ".join(f"{t} {k:,} (x{factors.get(t, 1):g})" for t, k in by_tier.items())
        rows.append(("tiers", f"{tiers} (each multiplies how long its memories last)"))
    expiry = r.pop("expiry", None)
    if isinstance(expiry, dict):
        rows.append(
            (
                "expiry",
                f"{expiry.get('with_expiry', 0):,} with a time to live, {expiry.get('within_7_days', 0):,} "
                f"expire within 7 days, {expiry.get('expired', 0):,} expired (removed by the next maintenance)",
            )
        )
    return rows


def render_keep(r: dict) -> str:
    if r["action"] == "keep":
        return f"kept {r['memory_id']}: now a {r['memory_type']}, no longer marked automatic"
    return f"{r['memory_id']}: {r['reason']}"


def render_set_tier(r: dict) -> str:
    if r["action"] == "tier":
        return f"{r['memory_id']}: moved from {r['was']} to {r['tier']}"
    return f"{r['memory_id']}: already {r['tier']}; nothing changed"


def render_prune(r: dict) -> str:
    done = "removed" if r["applied"] else "would remove"
    p = r["protected"]
    lines = [
        f"{r['scope']}: keeping the {r['kept']:,} strongest of {r['candidates']:,} unprotected memories; "
        f"{done} {r.get('removed', r.get('would_remove', 0)):,} (expired among them: {r['expired']:,})",
        f"protected: {p['pinned']:,} pinned, {p['kept']:,} kept, {p['open_task']:,} of open tasks, "
        f"{p['latest_handoff']:,} latest handoffs",
    ]
    lines += [
        f"  {m['id']} [{m['memory_type']}, {m['tier']}] strength {m['strength']:.4f}"
        f"{' (expired)' if m['expired'] else ''}: {m['content']}"
        for m in r["memories"]
    ]
    if not r["applied"] and r.get("would_remove"):
        lines.append("dry run: nothing changed; run again with --apply to remove them")
    return "\n".join(lines)


def render_doctor(r: dict) -> str:
    lines = [f"{p['severity'].upper()} [{p['check']}] {p['problem']}\n  fix: {p['fix']}" for p in r["problems"]]
    verdict = "healthy" if not r["problems"] else f"{r['errors']} errors, {r['warnings']} warnings"
    return "\n".join([*lines, f"checked {', '.join(r['checks'])}: {verdict}"])


def gist_rows(r: dict) -> list[tuple[str, str]]:
    """The gists' rows, taking their fields out of `r`: in `engram stats` their count and the runs'
    totals, in `engram consolidate` each gist written or updated (or that would be), with its text."""
    gists = r.pop("gists", None)
    if isinstance(gists, int):
        t = r.get("totals") or {}
        return [
            (
                "gists",
                f"{gists:,} (what recurring captures share; {t.get('gists_written', 0):,} written, "
                f"{t.get('gists_updated', 0):,} updated by later members, "
                f"{t.get('gists_merged', 0):,} merged into an alike one)",
            )
        ]
    if not isinstance(gists, list):
        return []
    verb = "wrote or updated" if r.get("applied") else "would write or update"
    rows = [("gists", f"{verb} {len(gists)} gist{'' if len(gists) == 1 else 's'}")]
    for i, g in enumerate(gists, 1):
        into = f" -> {g['into']}" if g.get("into") else ""
        merged = f", absorbing {len(g['absorbed'])} alike gist(s)" if g.get("absorbed") else ""
        head = f"{i}. {g['action']}, {len(g.get('new_sources') or [])} new of {g.get('sources')} sources{merged}{into}:"
        rows += [("", head), *(("", f"   {line}") for line in str(g.get("preview", "")).splitlines())]
    rows.append(("recurring", f"{r.pop('spared_recurring', 0)} kept although faded: alike, awaiting a gist"))
    return rows
