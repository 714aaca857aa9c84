"""The operations over the store as a whole and its administration, transport-free: maintenance and
its statistics, export and import, migration, backups, the secret scrub, reindexing, per-user keys.

`engram.api.Api` serves them (the op table in engram.ops declares them, Api.call checks their
arguments); they are here, beside the admin functions they call, because each works on the whole
store rather than on the caller's memories and tasks. Each takes the arguments complete plus the
caller's context and returns a JSON-ready dict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.core.metrics import Metrics
from engram.core.types import Ctx
from engram.engram import Engram

if TYPE_CHECKING:
    from engram.admin.scheduler import MaintenanceScheduler

# Keys of a maintenance report that name or quote memories; memory_stats shows a run without them.
PRIVATE_REPORT_KEYS = frozenset({"clusters", "pruned_ids"})


class StoreOperations:
    """The store-wide operations of one Api: its facade, its metrics and the daemon's scheduler."""

    def __init__(self, engram: Engram, metrics: Metrics, scheduler: MaintenanceScheduler | None = None):
        self.eng = engram
        self.metrics = metrics
        self.scheduler = scheduler

    def _user(self, ctx: Ctx) -> str:
        """The caller's user, ENGRAM_USER when the transport named none."""
        return self.eng.user_of(ctx.user_id)

    def consolidate_memory(self, ctx: Ctx, apply: bool) -> dict:
        from engram.admin.maintenance import consolidate_memory

        # Only the caller's memories: a report names memories and quotes them, and apply deletes.
        # The scheduled job (MaintenanceScheduler) covers every user.
        report = consolidate_memory(self.eng, apply=bool(apply), user_id=self._user(ctx))
        if apply:
            self.metrics.maintained(report)
            if self.scheduler is not None:
                self.scheduler.record(report)
        return report

    def run_maintenance(self, ctx: Ctx) -> dict:
        return self.consolidate_memory(ctx, apply=True)

    def doctor(self, ctx: Ctx) -> dict:
        """The store's integrity and the model's files (engram.admin.doctor)."""
        from engram.admin.doctor import doctor

        return doctor(self.eng)

    def prune_memories(self, ctx: Ctx, keep: int, apply: bool, all_projects: bool) -> dict:
        from engram.admin.prune import prune_memories

        return prune_memories(
            self.eng, keep, apply=bool(apply), user_id=self._user(ctx), project=ctx.project, all_projects=all_projects
        )

    def share_project(self, ctx: Ctx, action: str, path: str) -> dict:
        """Sharing of the caller's project through its git repository (engram.admin.share_git)."""
        from engram.admin.share_git import share_project

        return share_project(self.eng, self._user(ctx), ctx.project, path, action)

    def sync_project(
        self, ctx: Ctx, dry_run: bool, push: bool, read_only: bool, at_most: int | None, path: str
    ) -> dict:
        from engram.admin.share_git import sync_project

        return sync_project(
            self.eng,
            self._user(ctx),
            ctx.project,
            path,
            dry_run=bool(dry_run),
            push=bool(push),
            read_only=bool(read_only),
            at_most=at_most,
        )

    def memory_stats(self, ctx: Ctx) -> dict:
        from engram.admin.stats import memory_stats

        user = self._user(ctx)
        stats = memory_stats(self.eng, user_id=user)
        if self.scheduler is not None:
            status = self.scheduler.status()
            last = status.get("last_report")
            if last and last.get("user_id") not in (None, user):
                status["last_report"] = None  # another user's run: not even its counts are the caller's
            elif last:  # the caller's run or the all-user one: counts only, no ids or texts
                status["last_report"] = {k: v for k, v in last.items() if k not in PRIVATE_REPORT_KEYS}
            stats["maintenance"] = status
        return stats

    def export_memories(self, ctx: Ctx, path: str) -> dict:
        from engram.admin.export_import import export_memories

        return export_memories(self.eng, path, user_id=self._user(ctx))

    def import_memories(self, ctx: Ctx, path: str, on_conflict: str, reembed: bool) -> dict:
        from engram.admin.export_import import import_memories

        return import_memories(self.eng, path, on_conflict=on_conflict, reembed=bool(reembed), user_id=self._user(ctx))

    def import_from(self, ctx: Ctx, source: str, path: str, dry_run: bool) -> dict:
        """Memories from another tool's file (mcp-memory, mem0, markdown); see engram.admin.importers."""
        from engram.admin.importers import import_from

        return import_from(self.eng, source, path, dry_run=bool(dry_run), user_id=self._user(ctx))

    def migrate_store(self, ctx: Ctx, target: str, force: bool) -> dict:
        """The whole store, every user's rows, into another database (a local admin command)."""
        from engram.admin.export_import import migrate_store

        return migrate_store(self.eng, target, force=bool(force))

    def backup_store(self, ctx: Ctx, dest: str | None) -> dict:
        """A checked copy of the whole DuckDB file, taken in the daemon that owns it (local admin)."""
        from engram.admin.backups import backup_store

        return backup_store(self.eng, dest)

    def scrub_store(self, ctx: Ctx, apply: bool) -> dict:
        """The redactor over every row already stored; with apply, rewritten after a copy (local admin)."""
        from engram.admin.scrub import scrub_store

        return scrub_store(self.eng, apply=bool(apply))

    def reindex(self, ctx: Ctx, reembed: bool) -> dict:
        if reembed:
            n = self.eng.reembed_all()
            return {"reembedded": n, "model": self.eng.embedder.name}
        self.eng.rebuild_indexes()
        st = self.eng.index_status()
        return {"indexed": st["rows"], "edges": st["edges"]}

    # -- per-user keys (local administration: no HTTP route or MCP tool) -------
    def create_key(self, ctx: Ctx, user_id: str, label: str | None) -> dict:
        from engram.admin import keys

        return keys.create_key(self.eng, user_id, label)

    def list_keys(self, ctx: Ctx, user_id: str | None) -> dict:
        from engram.admin import keys

        return {"keys": keys.list_keys(self.eng, user_id)}

    def revoke_key(self, ctx: Ctx, key_id: str) -> dict:
        from engram.admin import keys

        return keys.revoke_key(self.eng, key_id)

    def health(self, ctx: Ctx) -> dict:
        out = {
            "status": "degraded" if self.eng.degraded else "ok",
            "memories": self.eng.index_status()["rows"],
            "model": self.eng.embedder.name,
            "backend": getattr(self.eng.embedder, "backend", None),
            "db": self.eng.path,
        }
        if self.eng.degraded:
            out["model_error"] = self.eng.degraded
            out["serving"] = "keyword (bm25) recall; stores are kept and embedded when the model is back"
        return out
