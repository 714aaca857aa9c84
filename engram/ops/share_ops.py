"""The operations of a project's shared memory in its git repository (engram.admin.share_git, docs/sharing.md)."""

from __future__ import annotations

from typing import Literal

from engram.ops.declarations import Cli, Op, Param

# The work tree the command runs in: the CLI makes it absolute (the daemon runs elsewhere).
_PATH = Param("path", str, "A directory inside the project's git work tree.", ".")

SHARE_OPS = (
    Op(
        "share_project",
        (
            Param("action", Literal["on", "off", "status"], "on: start sharing; off: remove the records; status."),
            _PATH,
        ),
        cli=(
            Cli(
                ("share",),
                "Share this project's conventions, pitfalls, tasks and handoffs through its git repository "
                "(on: commit the records; off: remove them in a commit; status).",
                positional=("action",),
            ),
        ),
    ),
    Op(
        "sync_project",
        (
            Param("dry_run", bool, "Show what would leave this machine and what arrived; change nothing.", False),
            Param("push", bool, "Also git push the commit of the records.", False),
            Param("read_only", bool, "Only read the records that arrived; write none.", False),
            Param(
                "at_most",
                int | None,
                "Read at most this many of the records that arrived (the oldest first); the rest at the next read.",
                None,
                ge=1,
            ),
            _PATH,
        ),
        cli=(
            Cli(
                ("sync",),
                "Read the project's shared records that arrived (after git pull), write and commit this "
                "machine's changes as records; push only with --push.",
            ),
        ),
    ),
)
