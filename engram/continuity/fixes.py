"""Error -> fix, by rules: a failed command, the edits made after it and the same command passing
later become one pitfall (what failed, where, and the changed lines that made it pass).

Pure functions and one small tracker whose state is plain JSON, so the hook can keep it between
two captures of a session (a fix often spans turns: the error in one, the edit in the next).
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fix", "FixTracker", "error_detail", "error_signature", "program_of", "same_command"]

HUNK_LINES = 12  # changed lines kept per fix: enough to show what was done, short enough to inject
EDITS_KEPT = 20  # edits remembered after an error that has not passed yet
OPEN_KEPT = 10  # errors waiting for their fix
LINE_CHARS = 160

# The line that names the error, most specific first: an exception or a compiler's coded error
# before a generic "error:", which a wrapper (npm, make) prints around the real one.
SIGNATURES = [
    re.compile(p, re.M)
    for p in (
        r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?)$",  # Python, Java
        r"^(FAILED \S+(?: - .*)?)$",  # pytest's short summary
        r"^(?:> )?(error(?:\[E\d{4}\])?: .+)$",  # rustc, cargo, gradle
        r"^([\w./-]+:\d+:\d+: [A-Z]+\d+ .+)$",  # ruff, flake8: file:line:col: CODE message
        r"^\s*\d+:\d+\s+error\s+(.+)$",  # eslint
        r"^\s*\u25cf (.+)$",  # jest: the failing test's name
        r"((?:error|warning) TS\d+: .+)$",  # tsc
        r"^(panic: .+)$",  # Go
        r"^((?:\./)?[\w./-]+\.go:\d+(?::\d+)?: .+)$",  # go build / vet
        r"^\[ERROR\] (.*(?:\.java:\[\d+,\d+\]|\u00bb).*)$",  # maven: a compiler error or a test's
        r"^((?:npm|yarn|pnpm) (?:ERR!|error) .+)$",
        r"^(Error: .+)$",  # node, docker compose, many CLIs
        r"^((?:fatal|error|ERROR): .+)$",  # git, make, compilers
        r"^((?:[\w./-]+: )?(?:line \d+: )?[\w./-]+: "
        r"(?:command not found|No such file or directory|Permission denied))$",
        r"^(.*(?:: unbound variable|\*\*\* .+ Stop\.))$",  # bash set -u, make
        r"^(.*(?:yaml|YAML|json|JSON|toml|TOML)[^\n]*(?:line|column) \d+.*)$",  # config parse errors
        r"^(.*\b(?:failed|Failed|FAILED|error|Error|ERROR)\b.*)$",  # anything saying it failed
    )
]
# Where the error points: "File "x.py", line 3", "x.rs:3:5", "x.java:[10,5]", "at x.js:3:5".
LOCATIONS = [
    re.compile(p)
    for p in (
        r'File "([^"]+)", line (\d+)',
        r"([\w./@-]*\w\.[A-Za-z]{1,6})\((\d+),\d+\)",  # tsc: file.ts(3,5)
        r"([\w./@-]*\w\.[A-Za-z]{1,6}):\[(\d+),\d+\]",  # maven: File.java:[10,5]
        r"([\w./@-]*\w\.[A-Za-z]{1,6}):(\d+)(?::\d+)?",
    )
]
EXIT_LINE = re.compile(r"(?i)^(?:exit[ _]code|process exited with code)\b")  # a client's note, not the error
NOISE = re.compile(r"0x[0-9a-f]+|\b\d+(?:\.\d+)?\s*(?:ms|s|sec|seconds)\b|\bin \d+(?:\.\d+)?s\b", re.I)
# Programs and wrappers a command is run through, which say nothing of what it does.
WRAPPERS = {"sudo", "env", "time", "uv", "poetry", "npx", "pnpm", "exec", "run", "bunx", "nice"}


@dataclass(frozen=True)
class Fix:
    """One error and what made it pass."""

    program: str
    signature: str  # the line naming the error
    location: str | None  # file:line the error names
    command: str  # the command that failed
    passed: str  # the command that passed after the edits
    edits: tuple[tuple[str, str], ...]  # (file, compact hunk)
    key: str  # the same error fixed the same way has the same key
    detail: str = ""  # more lines of the error (error_detail)

    def content(self) -> str:
        """The pitfall as a memory's text: what failed, where, and the changed lines."""
        where = f" (at {self.location})" if self.location else ""
        lines = [f"Pitfall ({self.program}): {self.signature}{where}, from `{_short(self.command, 200)}`."]
        if self.detail:
            lines.append(f"Error: {self.detail}")
        lines += ["Fixed by editing " + ", ".join(f for f, _ in self.edits) + ":"]
        for f, hunk in self.edits:
            if len(self.edits) > 1:
                lines.append(f"{f}:")
            lines.append(hunk)
        lines.append(f"Then `{_short(self.passed, 200)}` passed.")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "signature": self.signature,
            "location": self.location,
            "command": self.command,
            "passed": self.passed,
            "edits": [{"file": f, "hunk": h} for f, h in self.edits],
            "key": self.key,
            "detail": self.detail,
        }


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def error_signature(output: str) -> tuple[str, str | None]:
    """The line of a command's output that names its error, and the file:line it points at."""
    text = output or ""
    sig = ""
    for pattern in SIGNATURES:
        found = [m.group(1).strip() for m in pattern.finditer(text) if m.group(1).strip()]
        if found:
            # A traceback's exception and a summary's FAILED line come last; the others first.
            sig = found[-1] if pattern is SIGNATURES[0] else found[0]
            break
    if not sig:
        sig = next(
            (ln.strip() for ln in reversed(text.splitlines()) if ln.strip() and not EXIT_LINE.match(ln.strip())),
            "failed",
        )
    where = None
    for pattern in LOCATIONS:
        hits = pattern.findall(text)
        hits = [h for h in hits if "site-packages" not in h[0] and "node_modules" not in h[0]]
        if hits:
            f, line = hits[-1] if pattern is LOCATIONS[0] else hits[0]
            where = f"{f}:{line}"
            break
    return _short(sig, 300), where


def error_detail(output: str, signature: str) -> str:
    """Up to three more lines of the output that say what went wrong (a compiler's note, an
    expected/received pair), which a recurrence may quote instead of the signature's line."""
    keep = re.compile(
        r"(?i)\b(?:error|expected|received|found|caused|conflict|symbol|because|depends|"
        r"not found|no such|cannot|unable|invalid|refused|denied)\b"
    )
    out = []
    for line in (output or "").splitlines():
        line = line.strip()
        if line and keep.search(line) and line not in signature and _short(line, 200) not in out:
            out.append(_short(line, 200))
    return " | ".join(out[:3])


def _words(command: str) -> list[str]:
    last = command.split("&&")[-1].split("|")[0].strip()
    try:
        return shlex.split(last)
    except ValueError:
        return last.split()


def program_of(command: str) -> str:
    """The program a shell command runs (pytest for `python -m pytest`, cargo, npm, git)."""
    words = _words(command)
    for i, w in enumerate(words):
        if "=" in w.split("/")[0] or w in WRAPPERS:
            continue
        name = w.rsplit("/", 1)[-1]
        if re.fullmatch(r"python[\d.]*", name) and "-m" in words[i:]:
            j = words.index("-m", i)
            return words[j + 1] if j + 1 < len(words) else name
        return name[:60] or "shell"
    return "shell"


def _targets(command: str) -> set[str]:
    """The command's operands: its words that are not options (a test id keeps its file)."""
    out = set()
    for w in _words(command)[1:]:
        if w.startswith("-") or "=" in w.split("/")[0]:
            continue
        out.add(w.split("::")[0])
    return out


def same_command(failed: str, later: str) -> bool:
    """Whether `later` runs what `failed` ran again: the same program on the same operands, or on
    a part or a superset of them (`pytest tests/a.py::t` then `pytest tests/a.py -q`)."""
    if " ".join(failed.split()) == " ".join(later.split()):
        return True
    if program_of(failed) != program_of(later):
        return False
    a, b = _targets(failed), _targets(later)
    return not a or not b or a <= b or b <= a


def hunk(old: str, new: str) -> str:
    """The changed lines of an edit as a compact diff: `- old` / `+ new`, at most HUNK_LINES."""
    a, b = (old or "").splitlines(), (new or "").splitlines()
    lines = []
    for op in difflib.ndiff(a, b):
        if op[:2] in ("- ", "+ ") and op[2:].strip():
            lines.append(op[0] + " " + _short(op[2:].rstrip(), LINE_CHARS).rstrip())
    if len(lines) > HUNK_LINES:
        lines = lines[:HUNK_LINES] + [f"… {len(lines) - HUNK_LINES} more changed lines"]
    return "\n".join(lines)


@dataclass
class FixTracker:
    """Failed commands waiting for a fix, and the edits made since each; fed a session's events in
    order, it returns a Fix when an equivalent command passes after at least one edit."""

    open: list[dict] = field(default_factory=list)
    root: str | None = None  # the work tree: a location inside it is shown relative to it

    @classmethod
    def from_state(cls, state: Any, root: str | None = None) -> FixTracker:
        return cls([o for o in state if isinstance(o, dict)] if isinstance(state, list) else [], root)

    def state(self) -> list[dict]:
        return self.open[-OPEN_KEPT:]

    def edit(self, path: str, old: str, new: str) -> None:
        change = hunk(old, new)
        if not change:
            return
        for o in self.open:
            o["edits"] = (o["edits"] + [[path, change]])[-EDITS_KEPT:]

    def command(self, command: str, failed: bool, output: str = "") -> Fix | None:
        if failed:
            sig, where = error_signature(output)
            if where and self.root and where.startswith(self.root.rstrip("/") + "/"):
                where = where[len(self.root.rstrip("/")) + 1 :]
            # The same command failing again keeps the edits made so far: a fix in several tries.
            prev = next((o for o in self.open if same_command(o["command"], command)), None)
            edits = prev["edits"] if prev else []
            self.open = [o for o in self.open if o is not prev]
            first = (prev or {}).get("first") or {
                "signature": sig,
                "location": where,
                "detail": error_detail(output, sig),
            }
            self.open.append({"command": command, "signature": sig, "location": where, "edits": edits, "first": first})
            self.open = self.open[-OPEN_KEPT:]
            return None
        done = next((o for o in self.open if same_command(o["command"], command)), None)
        if done is None:
            return None
        self.open.remove(done)
        if not done["edits"]:
            return None  # passed without a change: flaky or an environment matter, no fix to learn
        first = done["first"]  # the error as it first appeared, not the last attempt's
        return _fix(
            program_of(done["command"]),
            first["signature"],
            first["location"],
            done["command"],
            command,
            done["edits"],
            str(first.get("detail") or ""),
        )


def _fix(
    program: str, signature: str, location: str | None, command: str, passed: str, edits: list, detail: str
) -> Fix:
    merged: dict[str, list[str]] = {}
    for path, change in edits:
        merged.setdefault(path, []).append(change)
    files = tuple((path, _trim("\n".join(changes))) for path, changes in merged.items())
    norm = NOISE.sub("#", signature.lower())
    norm = re.sub(r"\d+", "#", norm)
    key = hashlib.sha256("\x00".join([program, norm, *(f"{f}\n{h}" for f, h in files)]).encode()).hexdigest()[:16]
    return Fix(program, signature, location, command, passed, files, key, detail)


def _trim(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(
        lines[:HUNK_LINES] + ([f"… {len(lines) - HUNK_LINES} more changed lines"] if len(lines) > HUNK_LINES else [])
    )
