"""`engram doctor`'s checks of the clients' hooks and plugins (engram.admin.doctor has the store's)."""

from __future__ import annotations

from pathlib import Path

from engram.admin.doctor import finding
from engram.hooks import install as hi


def installation_problems(cwd: Path | None = None) -> list[dict[str, str]]:
    """The clients' hooks and plugins, as `engram hooks status` reads them, from `cwd`."""
    rows = hi.status(cwd)
    out = []
    for r in rows:
        where = f"{hi.CLIENTS[r['client']].label} ({r['scope']}: {r['path']})"
        if r.get("error"):
            out.append(finding("hooks", "error", f"{where} cannot be read: {r['error']}", "fix or remove the file"))
            continue
        if not r["installed"]:
            continue
        scope = "user" if r["scope"] == "plugin" else r["scope"]
        again = f"engram hooks install {r['client']} --scope {scope}"
        if r["runnable"] is False:
            out.append(finding("hooks", "error", f"{where} runs an engram that is not there any more", again))
        if r["missing_events"]:
            out.append(finding("hooks", "warning", f"{where} lacks the events {', '.join(r['missing_events'])}", again))
        if "feature_flag" in r and r["feature_flag"] is not True:
            out.append(
                finding(
                    "hooks",
                    "error",
                    f"{where}: [features] hooks is not true in Codex's config.toml, so Codex runs none of them",
                    again,
                )
            )
    if not any(r.get("installed") for r in rows):
        out.append(
            finding(
                "hooks",
                "warning",
                "no client runs engram's hooks: sessions are neither captured nor resumed automatically",
                "engram hooks install claude-code (or codex, gemini)",
            )
        )
    return out
