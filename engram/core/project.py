"""Which project a working directory belongs to: ENGRAM_PROJECT, else git's origin remote, else the main repository.

The rule, in order (docs/projects.md says the same for users):
1. ``ENGRAM_PROJECT`` set and not empty: that string is the project, as given.
2. The directory is inside a git work tree whose ``origin`` remote is set: the remote's URL,
   normalised (``git@github.com:Me/Repo.git``, ``https://github.com/Me/Repo`` and
   ``ssh://git@github.com/Me/Repo.git`` are all ``github.com/Me/Repo``), so every clone of one
   repository is one project.
3. Inside a git work tree without ``origin``: the path of the main repository (the directory
   holding the common ``.git``), so every worktree of one repository is one project.
4. Otherwise: no project (None).

The branch is not part of the identity; it is reported beside it (sessions record it).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engram.core.errors import EngramError

__all__ = ["MAX_PROJECT_CHARS", "Project", "check_project", "detect_project", "normalise_remote"]

log = logging.getLogger(__name__)

# git answers in a few milliseconds; a hung git (a network filesystem, a credential prompt) must
# not hold up a hook or a server start for long. 10 s, not less: on a saturated machine starting
# git alone has taken seconds, and a time-out means "no project", which scopes wrongly.
_GIT_TIMEOUT = 10.0


MAX_PROJECT_CHARS = 1000


def check_project(value: object, name: str = "project") -> str | None:
    """A project id as rows keep it: None (no project), or a non-empty string of at most
    MAX_PROJECT_CHARS characters, kept as given (it is compared exactly)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise EngramError(f"{name} must be a non-empty string (or left out for no project)")
    if len(value) > MAX_PROJECT_CHARS:
        raise EngramError(f"{name} is at most {MAX_PROJECT_CHARS} characters; got {len(value):,}")
    return value


@dataclass(frozen=True)
class Project:
    id: str  # what memories, tasks and sessions are scoped by
    name: str  # short, for display: the repository's name
    root: str | None = None  # the work tree's top directory (None when set by ENGRAM_PROJECT)
    branch: str | None = None
    source: str = "path"  # "env", "origin" or "path"


_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@host:owner/repo(.git)


def normalise_remote(url: str) -> str:
    """host/path for a network remote (no scheme, user, port of ssh, or .git), a resolved path for a local one."""
    url = url.strip()
    if not url:
        return ""
    if url.startswith("file://"):
        return str(Path(url[len("file://") :]).resolve())
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].lower()  # drop user[:password]@
        if url.startswith(("ssh://", "git+ssh://")):
            host = host.split(":", 1)[0]  # an ssh port is not part of which repository it is
    elif (m := _SCP.match(url)) and not url.startswith(("/", ".")):
        host, path = m.group(1).lower(), m.group(2)
    else:  # a local path
        return str(Path(url).expanduser().resolve())
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host}/{path.strip('/')}" if path else host


def _git(cwd: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as e:  # no git, or it hung: no project rather than no answer
        log.warning("git %s in %s failed (%s): taken as no project", " ".join(args[:1]), cwd, e)
        return None
    return r.stdout if r.returncode == 0 else None


def detect_project(cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Project | None:
    """The project of cwd (default: the process's), by the rule in the module docstring."""
    env = os.environ if env is None else env
    given = (env.get("ENGRAM_PROJECT") or "").strip()
    if given:
        return Project(id=given, name=given.rstrip("/").rsplit("/", 1)[-1] or given, source="env")
    where = Path(cwd) if cwd is not None else Path.cwd()
    if not where.is_dir():
        return None
    out = _git(where, "rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel")
    if out is None:
        return None
    lines = out.splitlines()
    if len(lines) < 2:  # a bare repository or .git itself: no work tree, no project
        return None
    common, top = Path(lines[0]).resolve(), lines[1]
    # symbolic-ref, not rev-parse HEAD: it answers in a repository with no commit yet too; it
    # fails on a detached HEAD, which has no branch.
    branch = (_git(where, "symbolic-ref", "--short", "-q", "HEAD") or "").strip() or None
    main = common.parent if common.name == ".git" else common
    remote = normalise_remote(_git(where, "config", "--get", "remote.origin.url") or "")
    if remote:
        return Project(id=remote, name=remote.rsplit("/", 1)[-1], root=top, branch=branch, source="origin")
    return Project(id=str(main), name=main.name, root=top, branch=branch, source="path")
