"""Every error engram raises on purpose: EngramError and its kinds, each with a readable message.

Light on purpose (no imports): entry points that only forward calls can catch these without
loading DuckDB, numpy or the model. The modules that raise them re-export them where callers
imported them before (engram.core.types.NotFound, engram.admin.export_import.ImportConflict, ...).
"""

from __future__ import annotations

__all__ = [
    "BackupInvalid",
    "BindRefused",
    "DatabaseDamaged",
    "DatabaseLocked",
    "DatabaseUnavailable",
    "DiskFull",
    "EngramError",
    "ExportIncomplete",
    "ExtensionError",
    "ImportConflict",
    "InvalidArguments",
    "MigrationMismatch",
    "ModelMismatch",
    "ModelUnavailable",
    "NotFound",
    "STORE_FAULTS",
    "SchemaTooNew",
    "StoreMismatch",
    "TargetNotEmpty",
    "TaskClaimed",
]


class EngramError(ValueError):
    """A request engram refuses, with a message that names the problem."""


class NotFound(EngramError):
    """An id that does not exist (or belongs to another user)."""


class ModelUnavailable(EngramError):
    """The embedding model cannot be loaded (offline, not installed)."""


class ModelMismatch(EngramError):
    """The store (or a file to import) was embedded with another model than the configured one."""


class DatabaseLocked(EngramError):
    """Another process holds the database file open for writing."""


class ExtensionError(EngramError):
    """A DuckDB extension engram needs is missing or does not match DuckDB's version."""


class ExportIncomplete(EngramError):
    """The written file holds fewer rows than the database."""


class InvalidArguments(EngramError):
    """Arguments that do not match an operation's declaration."""


class ImportConflict(EngramError):
    """The file holds ids that already exist here."""


class BindRefused(EngramError):
    """Serving HTTP beyond this machine without a token."""


class DatabaseUnavailable(EngramError):
    """A database URL that cannot be used: a bad URL, a server down or refusing, pgvector missing."""


class TargetNotEmpty(EngramError):
    """`engram migrate --to` a database that already holds rows (without --force)."""


class MigrationMismatch(EngramError):
    """A migrated copy that does not hold what the source holds (counts or sample recalls differ)."""


class StoreMismatch(EngramError):
    """A client asking the daemon of its ENGRAM_HOME for another store than the one it serves."""


class TaskClaimed(EngramError):
    """A task another live session holds (engram/continuity/claims.py): the message names the holder."""


class SchemaTooNew(EngramError):
    """A store migrated by a newer engram than the one running."""


class DatabaseDamaged(EngramError):
    """A database file that cannot be opened or read: truncated, garbled. It is left as it is."""


class DiskFull(EngramError):
    """A write refused because the disk holding the store is full; nothing of it was kept."""


class BackupInvalid(EngramError):
    """A backup file that cannot be opened or fails the integrity check."""


# Errors that are the store's or the model's, not an item's: a call that meets one fails as a
# whole, to be sent again once it passes (a batch's refused items are only bad input).
STORE_FAULTS: tuple[type[EngramError], ...] = (
    DatabaseDamaged,
    DatabaseLocked,
    DatabaseUnavailable,
    DiskFull,
    ModelMismatch,
    ModelUnavailable,
    StoreMismatch,
)
