"""What a shell command does to what failed, read from its words: ends a merge left in conflict or
gives it up, installs a program, runs a check in the mode that fixes what it checks, or hides its
own exit behind a filter. engram.continuity.fixes uses these to tell a fix from a look.
"""

from __future__ import annotations

import re

from engram.continuity.shell_commands import command_words, remote

__all__ = ["CONCLUDES", "FILTERED", "FIXER", "GIVES_UP", "INSTALLS", "checked"]

# What ends a merge, rebase or cherry-pick left in conflict: a commit or `--continue` concludes it
# (the conflict is resolved), an abort or a hard reset gives it up (nothing was fixed).
CONCLUDES = re.compile(r"\bgit(?: -C \S+)? (?:commit\b|(?:merge|rebase|cherry-pick|revert|am) --continue\b)")
GIVES_UP = re.compile(
    r"\bgit(?: -C \S+)? (?:(?:merge|rebase|cherry-pick|revert|am) --(?:abort|quit|skip)\b|reset --hard\b)"
)
# A command that installs a program or a package: after "gh: command not found", it is the fix.
INSTALLS = re.compile(
    r"\b(?:(?:apt|apt-get|dnf|yum|zypper|apk|brew|port|snap|winget|choco|scoop|pkg|pipx|gem|cargo|npm|pnpm|"
    r"yarn|bun|pip3?|uv(?: pip| tool)?) (?:install|add|i)|pacman -S\w*|nix-env -i\w*|nix profile install|go install)\b"
)
# A check run in the mode that rewrites what it checks: the linter's or formatter's own fix.
FIXER = re.compile(r"(?:\s--fix\b|\s--write\b|\S:fix\b|\s(?:fmt|format)\b(?!\s+--check))")
# A pipe into a filter that picks lines: the command exits as the filter does.
FILTERED = re.compile(r"\|\s*(?:grep|egrep|rg|Select-String)\b")


def checked(command: str) -> list[str]:
    """What a check runs on, whatever its mode: `bun run lint` for `bun run lint:fix`, `ruff
    check src` for `ruff check --fix src`, `prettier x.ts` for `prettier --write x.ts`."""
    return [w.removesuffix(":fix") for w in command_words(remote(command)) if not w.startswith("-")]
