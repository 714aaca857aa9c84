"""Error -> fix, by rules: a failed command, the edits made after it and the same command passing
later become one pitfall (what failed, where, and the changed lines that made it pass).

Pure functions and one small tracker whose state is plain JSON, so the hook can keep it between
two captures of a session (a fix often spans turns: the error in one, the edit in the next).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from engram.continuity.command_kinds import CONCLUDES, FILTERED, FIXER, GIVES_UP, INSTALLS, checked
from engram.continuity.error_lines import (
    NOISE,
    conflicted_files,
    error_detail,
    error_signature,
    missing_program,
    pasted_errors,
    reported_problems,
    same_error,
    short,
    suggested_commands,
)
from engram.continuity.fix_places import PLACES_KEPT, places_of, touches
from engram.continuity.shell_commands import (
    changed_command,
    command_words,
    host_of,
    program_of,
    read_only,
    remote,
    same_command,
    shaped,
    suite_covers,
    talks_to,
)

__all__ = ["Fix", "FixTracker", "error_detail", "error_signature", "pasted_errors", "program_of", "same_command"]

HUNK_LINES = 12  # changed lines kept per fix: enough to show what was done, short enough to inject
EDITS_KEPT = 20  # edits remembered after an error that has not passed yet
OPEN_KEPT = 10  # errors waiting for their fix
LINE_CHARS = 160


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
    # A fix that is a command rather than an edit: the commands that changed what failed (killing
    # the process on a port, installing a package), or none when `passed` itself is the changed
    # command (`PYTHONPATH=. pytest` after `pytest`).
    fix_commands: tuple[str, ...] = ()
    origin: str = "agent-run"  # or "user-pasted": the user pasted the error into a prompt
    # `passed` ran again and failed further on, with another error: this one was past (a fix in steps).
    moved_on: bool = False

    def content(self) -> str:
        """The pitfall as a memory's text: what failed, where, and what made it pass."""
        where = f" (at {self.location})" if self.location else ""
        if self.origin == "user-pasted":
            lines = [f"Pitfall ({self.program}): {self.signature}{where}, pasted by the user."]
        else:
            lines = [f"Pitfall ({self.program}): {self.signature}{where}, from `{short(self.command, 200)}`."]
        if self.detail:
            lines.append(f"Error: {self.detail}")
        if self.edits:
            lines += ["Fixed by editing " + ", ".join(f for f, _ in self.edits) + ":"]
            for f, hunk in self.edits:
                if len(self.edits) > 1:
                    lines.append(f"{f}:")
                lines.append(hunk)
        for c in self.fix_commands:
            lines.append(f"Fixed by running `{short(c, 300)}`.")
        if self.origin == "user-pasted":
            return "\n".join(lines)
        if not self.edits and not self.fix_commands:
            lines.append(f"Fixed by running `{short(self.passed, 300)}` instead, which passed.")
        elif self.moved_on:
            lines.append(f"Then `{short(self.passed, 200)}` got past this error.")
        else:
            lines.append(f"Then `{short(self.passed, 200)}` passed.")
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
            "fix_commands": list(self.fix_commands),
            "origin": self.origin,
            "moved_on": self.moved_on,
        }


# An error that says the command itself was called wrong: an option or subcommand it does not
# have, a path given to it that is not there or not tracked. Set right by calling it again another
# way (no edit), it is the agent's slip, not the project's pitfall (`git mv` of an untracked file,
# `git -C` into a removed worktree, a flag the CLI lacks).
SLIP = re.compile(
    r"(?i)\bunknown (?:flag|option|switch|shorthand flag)\b|\bunrecognized (?:option|arguments?)\b|"
    r"\binvalid option\b|\bno such option\b|\bflag provided but not defined\b|"
    r"\bnot under version control\b|\bdid not match any files?\b|\bcannot change to\b|"
    r"\bpathspec '[^']*' did not match\b|\bis not a git command\b|\bunknown command\b|"
    r"\b(?:accepts|requires) (?:at most |at least |exactly |between )?[\d ]+(?:and \d+ )?arg\(s\)"
)
# A run of tests, a build or a lint: run between a failure and its pass, it shows, it does not fix.
RERUN = re.compile(r"(?i)\b(?:test|tests|pytest|jest|vitest|mocha|build|lint|check|tsc|vet)\b")
# Errors of the agent's shell itself (Cygwin's fork on Windows), not of the command it ran.
SHELL_NOISE = re.compile(
    r"child_copy: cygheap|cygheap read copy failed|\bdofork: child|Command failed: cygpath|"
    r"fork: (?:retry: )?Resource temporarily unavailable|died waiting for dll loading"
)
# Commands whose failing is no error of the project: looking for something that is not there,
# stopping a process that is not running.
LOOKS_ONLY = re.compile(
    r"^(?:ls|cat|head|tail|less|grep|egrep|fgrep|rg|ag|find|fd|wc|stat|file|tree|which|type|pwd|echo|sleep|"
    r"lsof|pgrep|pkill|killall|kill|ps|awk|du|df|nc|test|\[|sed -n|git (?:status|log|show|diff|branch|rev-parse))\b"
)


def _words_of(command: str) -> str:
    return " ".join(command_words(command))


# A prompt saying the error is still there, without pasting it again.
NOT_FIXED = re.compile(
    r"(?i)\b(?:same (?:error|issue|problem|thing)|still (?:the same|getting|get|seeing|see|broken|fails|failing|"
    r"not working|doesn'?t work|no go|happening)|(?:didn'?t|doesn'?t|did not|does not) (?:work|help|fix)|"
    r"not fixed|no change|still (?:doesn'?t|don'?t|isn'?t|aren'?t|can'?t|cannot|won'?t|not|no|stuck|blank|crash\w*))\b"
)
PASTED_WAIT = 2  # prompts a pasted error waits for its first edit before it is dropped


def hunk(old: str, new: str) -> str:
    """The changed lines of an edit as a compact diff: `- old` / `+ new`, at most HUNK_LINES."""
    a, b = (old or "").splitlines(), (new or "").splitlines()
    lines = []
    for op in difflib.ndiff(a, b):
        if op[:2] in ("- ", "+ ") and op[2:].strip():
            lines.append(op[0] + " " + short(op[2:].rstrip(), LINE_CHARS).rstrip())
    if len(lines) > HUNK_LINES:
        lines = lines[:HUNK_LINES] + [f"… {len(lines) - HUNK_LINES} more changed lines"]
    return "\n".join(lines)


CHANGED_COMMANDS_KEPT = 4
TOLD_KEPT = 4  # commands a failure's output told to run, kept with it
TOKEN = re.compile(r"[A-Za-z0-9_.:-]{3,}")
COMMON_TOKENS = {"sudo", "the", "and", "for", "not", "bin", "usr", "bash", "true", "null", "dev", "with", "from"}


def _tokens(text: str) -> set[str]:
    return {t.lower().strip(".:-") for t in TOKEN.findall(text)} - COMMON_TOKENS


@dataclass
class FixTracker:
    """Failed commands waiting for a fix, and the edits and commands made since each; fed a
    session's events in order, it returns a Fix when an equivalent command passes for real after an
    edit that touches what failed, or after a changed command."""

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

    def request(self, text: str) -> list[Fix]:
        """A user's prompt: it settles the errors pasted in the prompt before (fixed by the edits
        made since, unless this prompt pastes the same error again), and may paste new ones."""
        fixes = []
        found = pasted_errors(text)
        still = not found and bool(NOT_FIXED.search(text))
        waiting = [o for o in self.open if o.get("pasted")]
        if not found and not (still and waiting):
            found = reported_problems(text)  # a problem told in words ("the table gets stuck")
        for pending in waiting:
            if still:
                # "same error", "still broken": not fixed yet, and not by the edits made so far;
                # the edits to come may fix it.
                pending["edits"] = []
                continue
            if not pending["edits"] and pending.get("waited", 0) < PASTED_WAIT and not found:
                # Nothing edited yet: the user answered a question or said how to fix it ("set it
                # to 9998"); the edits come after this prompt.
                pending["waited"] = pending.get("waited", 0) + 1
                continue
            self.open.remove(pending)
            if not any(same_error(sig, pending["signature"]) for sig, _ in found):
                fix = self._pasted_fix(pending)
                if fix is not None:
                    fixes.append(fix)
        for sig, where in found:
            first = {"signature": sig, "location": where, "detail": error_detail(text, sig), "command": ""}
            self.open.append(
                {
                    "pasted": True,
                    "command": "",
                    "signature": sig,
                    "location": where,
                    "edits": [],
                    "first": first,
                    "places": [],
                    "ran": [],
                }
            )
        self.open = self.open[-OPEN_KEPT:]
        return fixes

    def _pasted_fix(self, pending: dict) -> Fix | None:
        """The fix of a pasted error: the edits the agent made after it (the user's report is the
        pass: the error is not pasted again)."""
        edits = pending["edits"]  # what the agent changed for it: the turn's edits
        if not edits:
            return None
        first = pending["first"]
        detail = str(first.get("detail") or "")
        return _fix("pasted", first["signature"], first["location"], "", "", edits, detail, (), "user-pasted")

    def command(self, command: str, failed: bool, output: str = "", unfinished: bool = False) -> Fix | None:
        if unfinished:
            return None  # cut off by a time limit, killed, left running: neither a failure nor a pass
        if failed:
            sig, where = error_signature(output)
            if where and self.root and where.startswith(self.root.rstrip("/") + "/"):
                where = where[len(self.root.rstrip("/")) + 1 :]
            # The same command failing again keeps the edits made so far: a fix in several tries.
            if LOOKS_ONLY.match(_words_of(command)) or SHELL_NOISE.search(sig):
                return None  # a look that found nothing (ls, grep, cat of a missing file): not the project's error
            prev = next((o for o in self.open if not o.get("pasted") and same_command(o["command"], command)), None)
            self._ran(command, skip=prev)
            self.open = [o for o in self.open if o is not prev]
            got_past = None if prev else self._program_found(command, sig)
            if prev is not None and not same_error(prev["signature"], sig):
                # Another error now: the one before is past. A changed command got past it (`cargo:
                # command not found`, then through `nix-shell --run`): that is its fix. Else the
                # edits made since that touch it, or the commands run since that share its words,
                # fixed it, and the run fails further on (a fix in several steps: an import, then
                # a missing column). The new error starts with no edits of its own.
                if changed_command(prev["command"], command):
                    got_past = self._settle(prev, command, [])
                else:
                    places = [self._inside(p) for p in prev.get("places") or []]
                    touching = [e for e in prev["edits"] if touches(e[0], places)]
                    got_past = self._settle(prev, command, touching, moved_on=True)
                prev = None
            edits = prev["edits"] if prev else []
            first = (prev or {}).get("first") or {
                "signature": sig,
                "location": where,
                "detail": error_detail(output, sig),
                "command": command,
            }
            places = list(dict.fromkeys([*((prev or {}).get("places") or []), *places_of(command, output)]))
            told = [*((prev or {}).get("told") or []), *suggested_commands(output, program_of(command))]
            conflicts = list(dict.fromkeys([*((prev or {}).get("conflicts") or []), *conflicted_files(output)]))
            self.open.append(
                {
                    "command": command,
                    "signature": sig,
                    "location": where,
                    "edits": edits,
                    "first": first,
                    "places": places[:PLACES_KEPT],
                    "ran": (prev or {}).get("ran") or [],
                    "told": told[:TOLD_KEPT],
                    "conflicts": conflicts[:PLACES_KEPT],
                    "missing": missing_program(str(first["signature"])),
                }
            )
            self.open = self.open[-OPEN_KEPT:]
            return got_past
        if CONCLUDES.search(command) or GIVES_UP.search(command):
            merging = next((o for o in reversed(self.open) if o.get("conflicts")), None)
            if merging is not None:
                return self._conflict_ended(merging, command)
        done = next((o for o in self.open if not o.get("pasted") and same_command(o["command"], command)), None)
        self._ran(command, skip=done)
        if done is None:
            return self._program_found(command) or self._suite_passed(command)
        self.open.remove(done)
        places = [self._inside(p) for p in done.get("places") or []]
        return self._settle(done, command, [e for e in done["edits"] if touches(e[0], places)])

    def _conflict_ended(self, merging: dict, command: str) -> Fix | None:
        """A merge left in conflict, ended by `command`: given up, nothing was fixed; concluded,
        its fix is how the conflicted files were resolved (the edits of them, the commands that
        name them: `git checkout --theirs F && git add F`)."""
        self.open.remove(merging)
        if GIVES_UP.search(command):
            return None
        names = merging["conflicts"]
        # The conflicted files themselves: a file beside one is not its resolution.
        edits = [e for e in merging["edits"] if any(f"/{e[0].lstrip('./')}".endswith(f"/{n}") for n in names)]
        ran = [*(merging.get("ran") or []), command]
        naming = [c for c in ran if any(n in c for n in names)]
        # One resolution run in steps and then in one line with the commit: the line says it all.
        how = tuple(c for i, c in enumerate(naming) if not any(c in d for d in naming[i + 1 :]))
        how = how[-CHANGED_COMMANDS_KEPT:]
        if not edits and not how:
            return None
        return _fix_of(merging, command, edits, how)

    def _program_found(self, command: str, error: str | None = None) -> Fix | None:
        """A program an error said was missing (`gh: command not found`) runs now, in another
        command, passing or failing with another `error`: it was installed by the commands run
        since that install something (`sudo pacman -S github-cli`), its fix; none, no lesson."""
        program = program_of(command)
        waiting = next((o for o in reversed(self.open) if not o.get("pasted") and o.get("missing") == program), None)
        if waiting is None or (error is not None and missing_program(error) == program):
            return None
        self.open.remove(waiting)
        installs = tuple(c for c in waiting.get("ran") or [] if INSTALLS.search(c))
        if not installs:
            return None
        return _fix_of(waiting, command, [], installs, program=program, moved_on=error is not None)

    def _suite_passed(self, command: str) -> Fix | None:
        """The whole suite passed (`mise run test` after `go test ./session -run TestX` failed):
        the last failure of a part of it with edits since that touch it is fixed by them."""
        for o in reversed(self.open):
            if o.get("pasted") or not suite_covers(command, o["command"]):
                continue
            places = [self._inside(p) for p in o.get("places") or []]
            touching = [e for e in o["edits"] if touches(e[0], places)]
            if touching:
                self.open.remove(o)
                return self._settle(o, command, touching)
        return None

    def _settle(self, done: dict, command: str, edits: list, moved_on: bool = False) -> Fix | None:
        """The fix of the failure `done` once `command` got past it: the edits that touch it, or
        else `command` itself when it is the failing one changed, or else the commands run in
        between that share its words; None when nothing did (flaky, or not ours to learn)."""
        first = done["first"]  # the error as it first appeared, not the last attempt's
        fix_commands: list[str] = []
        if not edits and SLIP.search(f"{first['signature']}\n{first.get('detail') or ''}"):
            return None  # the command was called wrong and called right next: a slip, no lesson
        if not edits and not (
            not moved_on and changed_command(str(first.get("command") or done["command"]), command)
        ):  # unless the passing command is itself the fix: the commands run in between
            fix_commands = list(done.get("ran") or [])
            if moved_on:
                # The run failed on: a command is its fix only when it names what the error names
                # (`uv pip install sqlalchemy` for "requires SQLAlchemy"), not merely the failing
                # command's operands.
                said = _tokens(str(first["signature"]))
                fix_commands = [c for c in fix_commands if _tokens(remote(c)) & said]
            if not fix_commands:
                return None
        elif not edits and FILTERED.search(command):
            return None  # `… | grep x` exits as grep does: the changed command's pass is not shown
        return _fix_of(done, command, edits, tuple(fix_commands), moved_on=moved_on)

    def _inside(self, place: str) -> str:
        root = (self.root or "").rstrip("/")
        return place[len(root) + 1 :] if root and place.startswith(root + "/") else place

    def _ran(self, command: str, skip: dict | None) -> None:
        """A command that passed and changes something, kept by each open failure it shares a word
        with (`lsof -ti :3000 | xargs kill` for "address already in use :3000") or whose output
        told to run it (git's "use 'git pull'" after a rejected push): it may be the fix."""
        fixer = bool(FIXER.search(command))  # `bun run lint:fix`, `ruff check --fix`: it writes
        if read_only(command) or (RERUN.search(command) and not fixer):
            return  # a look, or a run of tests or a build: what it shows is no change
        words = _tokens(remote(command))
        run = [w for w in command_words(remote(command)) if not w.startswith("-")]
        for o in self.open:
            if o is skip or o.get("pasted"):
                continue
            named = any(n in command for n in o.get("conflicts") or [])  # `git checkout --theirs F`
            installs = bool(o.get("missing")) and bool(INSTALLS.search(command))
            # Run on the host the failure could not reach or got a wrong answer from (`dig @h`
            # timing out, then `ssh h "uci set firewall…"`): a change to that host.
            there = bool(host_of(command)) and host_of(command) in talks_to(o["command"])
            own_fixer = fixer and checked(command) == checked(o["command"])  # lint, then lint:fix
            if named or installs or there or own_fixer or any(run[: len(told)] == told for told in o.get("told") or []):
                o["ran"] = ((o.get("ran") or []) + [command[:500]])[-CHANGED_COMMANDS_KEPT:]
                continue
            # The failure's own words: its error line, and what the command names beyond its program.
            about = _tokens(f"{o['signature']} {(o.get('first') or {}).get('signature', '')}")
            about |= {t for t in _tokens(" ".join(command_words(remote(o["command"]))[1:])) if len(t) > 3}
            about -= _tokens(program_of(o["command"]))
            if words & about:
                o["ran"] = ((o.get("ran") or []) + [command[:500]])[-CHANGED_COMMANDS_KEPT:]


def _fix(
    program: str,
    signature: str,
    location: str | None,
    command: str,
    passed: str,
    edits: list,
    detail: str,
    fix_commands: tuple[str, ...] = (),
    origin: str = "agent-run",
    moved_on: bool = False,
) -> Fix:
    merged: dict[str, list[str]] = {}
    for path, change in edits:
        merged.setdefault(path, []).append(change)
    files = tuple((path, _trim("\n".join(changes))) for path, changes in merged.items())
    norm = NOISE.sub("#", signature.lower())
    norm = re.sub(r"\d+", "#", norm)
    how = [f"{f}\n{h}" for f, h in files] or [*fix_commands] or [shaped(passed)]
    key = hashlib.sha256("\x00".join([program, norm, *how]).encode()).hexdigest()[:16]
    return Fix(program, signature, location, command, passed, files, key, detail, fix_commands, origin, moved_on)


def _fix_of(
    failing: dict,
    passed: str,
    edits: list,
    fix_commands: tuple[str, ...],
    *,
    program: str | None = None,
    moved_on: bool = False,
) -> Fix:
    """The fix of an open failure (its first error, the command that failed), `passed` the run
    that shows it fixed; `program` when it is not the failed command's."""
    first = failing["first"]
    return _fix(
        program or program_of(failing["command"]),
        first["signature"],
        first["location"],
        str(first.get("command") or failing["command"]),
        passed,
        edits,
        str(first.get("detail") or ""),
        fix_commands,
        moved_on=moved_on,
    )


def _trim(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(
        lines[:HUNK_LINES] + ([f"… {len(lines) - HUNK_LINES} more changed lines"] if len(lines) > HUNK_LINES else [])
    )
