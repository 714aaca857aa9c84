"""A project's shared memory in its own repository (docs/sharing.md): `engram share on|off|status`
and `engram sync`, over the records of engram/admin/share_records.py.

The records live in the work tree, under `.engram/shared/<machine>/<YYYY-MM>-<branch>.jsonl`,
committed with the code: `git push` and `git pull` carry them, a pull request shows them, and
each file has one writer, so two clones never conflict (a `merge=union` attribute covers the one
machine writing on two branches). engram commits only that folder, with the user's git identity,
and pushes only when asked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from engram.admin.share_records import Author, Ledger, apply_records, outgoing, record_order
from engram.core.errors import EngramError

if TYPE_CHECKING:
    from engram.engram import Engram

SHARED_DIR = ".engram/shared"
# Records a session start reads at most (the rest at the next one): 100 new ones took 6.9 s at a load
# of 50 on 2 cores, inside the hook's 8 s (benchmarks/RESULTS.md, issue 50).
START_READ_MAX = 100
_GIT_TIMEOUT = 60.0
_README = """# engram: this project's shared memory

Written by `engram` (docs/sharing.md): the project's conventions, decisions, pitfalls with their
fixes, tasks, handoffs and progress, as append-only JSON Lines, one folder per machine. Review
them like code. Never here: episodes, memories marked private, secrets (redacted before writing),
`<private>` spans. `engram share off` removes this folder in a commit of yours.
"""
# Each file has one writer; the same machine writing on two branches appends to one file on
# both, and a union merge keeps both sides' lines (a record's id makes it read once).
_ATTRIBUTES = "*.jsonl merge=union\n"


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EngramError(f"git {args[0]} failed: {e}") from None
    if check and r.returncode != 0:
        raise EngramError(f"git {' '.join(args[:2])} failed: {(r.stderr or r.stdout).strip()[:500]}")
    return r


def repo_root(path: str) -> Path:
    """The top of the git work tree holding `path`, or a clear error."""
    if not os.path.isabs(path):  # the daemon runs in a directory of its own: "." means nothing there
        raise EngramError(f"path must be absolute (the work tree's directory); got {path!r}")
    if not Path(path).is_dir():
        raise EngramError(f"{path} is not a directory")
    r = _git(Path(path), "rev-parse", "--show-toplevel", check=False)
    if r.returncode != 0:
        raise EngramError(f"{path} is not inside a git work tree: sharing lives in the project's repository")
    return Path(r.stdout.strip())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "x"


def machine_name(eng: Engram) -> str:
    """This machine as its records name it: its host and an id kept in ENGRAM_HOME (two homes on
    one host are two machines)."""
    id_file = Path(eng.settings.home) / "machine-id"
    try:
        machine_id = id_file.read_text().strip()
    except FileNotFoundError:
        machine_id = uuid.uuid4().hex[:8]
        id_file.parent.mkdir(parents=True, exist_ok=True)
        id_file.write_text(machine_id + "\n")
    return f"{_slug(socket.gethostname())}-{machine_id}"


def author(eng: Engram, root: Path) -> Author:
    """Who writes this machine's records: the repository's git identity, and this machine."""
    name = _git(root, "config", "user.name", check=False).stdout.strip()
    email = _git(root, "config", "user.email", check=False).stdout.strip()
    if not name and not email:
        raise EngramError("git has no user.name or user.email here: set them (git config user.email ...) first")
    return Author(f"{name} <{email}>".strip(), machine_name(eng))


def _project(project: str | None) -> str:
    if project is None:
        raise EngramError("this directory belongs to no project: sharing is per project (docs/projects.md)")
    return project


def enabled(root: Path) -> bool:
    return (root / SHARED_DIR).is_dir()


def _record_files(root: Path) -> list[Path]:
    return sorted((root / SHARED_DIR).glob("*/*.jsonl"))


def _new_records(root: Path, ledger: Ledger) -> tuple[list[dict], dict[str, int], list[str]]:
    """Records past where the ledger read each file (a file that shrank is read again whole),
    the files' sizes now, and the lines that were not records (named, skipped)."""
    records, sizes, bad = [], {}, []
    for path in _record_files(root):
        rel = str(path.relative_to(root / SHARED_DIR))
        size = path.stat().st_size
        sizes[rel] = size
        start = ledger.offsets.get(rel, 0)
        if start == size:
            continue
        with open(path, "rb") as f:
            f.seek(start if start < size else 0)
            for no, raw in enumerate(f, 1):
                try:
                    rec = json.loads(raw)
                    if not isinstance(rec, dict) or not {"r", "op", "at", "by", "machine"} <= rec.keys():
                        raise ValueError("not a record")
                except ValueError:
                    if raw.strip():
                        bad.append(f"{rel}: line {no} after byte {start}")
                    continue
                if rec["r"] not in ledger.read:
                    records.append(rec)
    return records, sizes, bad


def _write(root: Path, author_: Author, records: list[dict]) -> list[str]:
    """Append the records to this machine's file of the month and branch; the files written."""
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD", check=False).stdout.strip() or "HEAD"
    by_file: dict[Path, list[dict]] = {}
    for rec in records:
        path = root / SHARED_DIR / author_.machine / f"{rec['at'][:7]}-{_slug(branch)}.jsonl"
        by_file.setdefault(path, []).append(rec)
    for path, recs in by_file.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in recs)
    return sorted(str(p.relative_to(root)) for p in by_file)


def _commit(root: Path, message: str) -> str | None:
    """Commit the shared folder alone (the user's other changes stay as they are); the commit, or
    None when there was nothing to commit."""
    _git(root, "add", "--", SHARED_DIR)
    if _git(root, "diff", "--cached", "--quiet", "--", SHARED_DIR, check=False).returncode == 0:
        return None
    _git(root, "commit", "-q", "-m", message, "--", SHARED_DIR)
    return _git(root, "rev-parse", "--short", "HEAD").stdout.strip()


def _preview(rec: dict) -> str:
    text = rec.get("content") or rec.get("name") or rec.get("task") or ""
    line = " ".join(str(text).split())
    return f"{rec['op']} {rec.get('type', '')} {rec.get('id', '')}: {line[:120]}".replace("  ", " ")


def share_project(eng: Engram, user: str, project: str | None, path: str, action: str) -> dict:
    """`engram share on|off|status` for the project whose work tree holds `path`."""
    project = _project(project)
    root = repo_root(path)
    shared = root / SHARED_DIR
    if action == "status":
        ledger = Ledger.load(eng, project)
        files = _record_files(root) if enabled(root) else []
        return {
            "enabled": enabled(root),
            "folder": str(shared),
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "records_read": len(ledger.read),
            "pending": len(outgoing(eng, user, project, Ledger.load(eng, project), author(eng, root)))
            if enabled(root)
            else 0,
        }
    if action == "on":
        shared.mkdir(parents=True, exist_ok=True)
        (shared / "README.md").write_text(_README)
        (shared / ".gitattributes").write_text(_ATTRIBUTES)
        result = sync_project(eng, user, project, path, message="engram: share this project's memory")
        return {"enabled": True, **result}
    if action == "off":
        if not enabled(root):
            return {"enabled": False, "commit": None, "removed": 0}
        removed = len(_record_files(root))
        tracked = _git(root, "ls-files", "--", SHARED_DIR).stdout.strip()
        if tracked:
            _git(root, "rm", "-r", "-q", "--", SHARED_DIR)
        commit = None
        if tracked:
            _git(root, "commit", "-q", "-m", "engram: stop sharing this project's memory", "--", SHARED_DIR)
            commit = _git(root, "rev-parse", "--short", "HEAD").stdout.strip()
        if shared.exists():  # files never committed
            shutil.rmtree(shared)
        Ledger(project).forget_all(eng)
        return {"enabled": False, "commit": commit, "removed": removed}
    raise EngramError(f"share takes on, off or status; got {action!r}")


def sync_project(
    eng: Engram,
    user: str,
    project: str | None,
    path: str,
    *,
    dry_run: bool = False,
    push: bool = False,
    read_only: bool = False,
    at_most: int | None = None,
    message: str = "engram: project memory",
) -> dict:
    """Read the records that arrived (in the work tree: a fetch is the user's), write this store's
    changes as records and commit them; push only when asked. dry_run: show both, change nothing.
    at_most: read only that many of the records that arrived now (tasks, then the oldest), the
    rest at the next read (a session start stays within its hook's time)."""
    project = _project(project)
    root = repo_root(path)
    if not enabled(root):
        raise EngramError(f"sharing is off in {root}: `engram share on` turns it on")
    with eng.lock:
        ledger = Ledger.load(eng, project)
        arrived, sizes, bad = _new_records(root, ledger)
        # Reading needs no git identity (a CI runner may have none); writing does.
        who = Author("", machine_name(eng)) if read_only else author(eng, root)
        theirs = [r for r in arrived if r.get("machine") != who.machine]
        if dry_run:
            leaving = [] if read_only else outgoing(eng, user, project, ledger, who)
            return {
                "dry_run": True,
                "arrived": [_preview(r) for r in theirs],
                "leaving": [_preview(r) for r in leaving],
                "unreadable": bad,
            }
        later = at_most is not None and len(theirs) > at_most
        if later:
            arrived = sorted(theirs, key=record_order)[:at_most]
        applied = apply_records(eng, user, project, ledger, arrived, who.machine)
        if not later:  # else the files are scanned again next time; the ledger's ids skip what was read
            ledger.offsets.update(sizes)
        written, commit = [], None
        leaving = [] if read_only else outgoing(eng, user, project, ledger, who)
        if leaving:
            files = _write(root, who, leaving)
            ledger.read.update(r["r"] for r in leaving)
            for f in files:
                rel = str(Path(f).relative_to(SHARED_DIR))
                ledger.offsets[rel] = (root / f).stat().st_size
            written = files
        ledger.save(eng)
    if not read_only:
        commit = _commit(root, message)
    pushed = False
    if push or (eng.settings.share_push and commit and not read_only):
        _git(root, "push", "-q")
        pushed = True
    return {
        "arrived": len(theirs),
        "read": len(arrived) if later else len(theirs),
        "applied": applied,
        "written": len(leaving),
        "files": written,
        "commit": commit,
        "pushed": pushed,
        "unreadable": bad,
    }


def read_at_start(eng: Engram, user: str, project: str | None, path: str | None) -> dict | None:
    """At session start: read the records the work tree gained since the last read (a pull, a
    checkout), when the project shares; None when it does not. Writes nothing to the repository."""
    if project is None or not path or not os.path.isdir(os.path.join(path, SHARED_DIR)):
        return None
    return sync_project(eng, user, project, path, read_only=True, at_most=START_READ_MAX)
