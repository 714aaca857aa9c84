"""What a shell tool's output says beyond its text: that the user refused the call, that the
command did not finish (a time limit, a kill, left running), that a patch did not apply, that a
failure hides behind `| tail`, what Gemini CLI's frame around it holds; and which of a long
output's lines to keep. Used by engram.hooks.transcript for every client's shell tool.
"""

from __future__ import annotations

import re

__all__ = [
    "EXIT_CODE",
    "FAILED_OUTPUT",
    "HIDDEN_BY_PIPE",
    "NO_MATCH_PROGRAM",
    "PATCH_FAILED",
    "RUNNING",
    "UNFINISHED",
    "head_tail",
    "refused",
    "said",
    "shell_output",
    "tail",
]

# Shell outputs that state an exit code: "Exit code 1" (Claude Code), "Exit Code: 1" (Gemini
# CLI), "Exit code: 1", "exit_code": 1, "Process exited with code 1" (Codex).
EXIT_CODE = re.compile(r"(?i)(?:exit[ _]code\"?:?\s*|exited with code\s+)(-?\d+)")
RUNNING = re.compile(r"Process running with session ID (\d+)\n?")
# A tool call the user rejected or interrupted (Claude Code, Codex), or one Claude Code cancelled
# because a call beside it failed: not a command that failed.
REFUSED = re.compile(
    r"The user doesn't want to proceed with this tool use|\[Request interrupted by user|"
    r"Cancelled: parallel tool call|"
    r"(?:exec command|patch|command) rejected by user|\baborted by user\b|^aborted$",
    re.I | re.M,
)
# A command that did not finish: a time limit (Claude Code, Codex, Gemini CLI), a kill, a process
# left running in the background (Codex's exec_command session, Claude Code's background shell).
UNFINISHED = re.compile(
    r"(?i)\b(?:command )?timed out after\b|\btimeout: the monitored command dumped core|"
    r"^Process running with session ID \d+|Command running in background with ID|"
    r"\bcommand was cancelled\b|^Killed$|^Terminated$|\bsignal: killed\b|^\^C$",
    re.M,
)
# apply_patch's refusal of a patch that does not apply (Codex writes it without an exit code).
PATCH_FAILED = re.compile(
    r"^(?:error: )?(?:Failed to find expected lines|apply_patch verification failed|invalid hunk|"
    r"Invalid patch|.*is not a valid hunk header)",
    re.I | re.M,
)
# A command whose output goes through a filter, so its exit code is the filter's.
HIDDEN_BY_PIPE = re.compile(r"\|\s*(?:tail|head|grep|cat|less)\b[^|]*$")
# Lines only a failing build, test run or linter prints.
FAILED_OUTPUT = re.compile(
    r"(?m)^(?:FAILED \S+::|--- FAIL: |FAIL\s+\S|E\s+\w+(?:Error|Exception)\b|Traceback \(most recent call last\)|"
    r"\S+\.go:\d+:\d+: |\S+\(\d+,\d+\): error TS\d+|error(?:\[E\d+\])?: |npm ERR! |"
    r"\s*\u25cf .+ \u203a |.*\bERROR task failed|\s*\d+ (?:failed|errors?)\b)"
)
# A line that names an error, kept from the middle of a long output.
KEY_LINE = re.compile(
    FAILED_OUTPUT.pattern.removeprefix("(?m)")
    + r"|^\s*(?:at )?\S+:\d+:\d+:? (?:lint/\S+|[A-Z]+\d+ )|^\S+\.\w+ (?:format|lint/\S+)\b|"
    r"^\s*(?:E\s+)?(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b:",
    re.M,
)
# Programs whose exit code 1 with no output means "nothing found".
# Errors of a program that goes on and exits 0 after them: psql running a file without ON_ERROR_STOP.
ERROR_EXIT_ZERO = re.compile(r"(?m)^psql:\S+:\d+: (?:ERROR|FATAL): ")
NO_MATCH_PROGRAM = re.compile(r"(?:^|[|;&]\s*)(?:grep|egrep|fgrep|rg|ag|pgrep|diff|test|\[|which|command -v)\b")


GEMINI_SHELL_FIELDS = re.compile(
    r"^(Command|Directory|Output|Error|Exit Code|Signal|Background PIDs|Process Group PGID): ?", re.M
)


def shell_output(output: str) -> str:
    """What a command printed, without Gemini CLI's frame around it ("Command: ...", "Directory:
    ...", "Output: ...", "Error: (none)", "Exit Code: 1", "Signal: ...", "Process Group PGID: ...")."""
    output = output or ""
    framed = (output.startswith("Command: ") and "\nOutput: " in output) or (
        # Other versions start at the output: the fields after it say it is the frame.
        output.startswith("Output: ") and re.search(r"^(?:Exit Code|Process Group PGID): ", output, re.M)
    )
    if not framed:
        return output
    fields: dict[str, str] = {}
    marks = list(GEMINI_SHELL_FIELDS.finditer(output))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(output)
        fields.setdefault(m.group(1), output[m.end() : end].strip())
    said = [v for k in ("Output", "Error") if (v := fields.get(k, "")) and v not in ("(none)", "(empty)")]
    code = fields.get("Exit Code", "")
    return "\n".join(said + ([f"Exit Code: {code}"] if code and code != "(none)" else []))


def refused(output: str) -> bool:
    """Whether a tool call's output says the user rejected or cancelled it (so it never ran)."""
    return bool(REFUSED.search((output or "")[:400]))


def said(output: str) -> bool:
    """Whether an output holds anything but a client's note of the exit code."""
    return any(ln.strip() and not EXIT_CODE.search(ln) for ln in (output or "").splitlines())


def head_tail(text: str, n: int) -> str:
    """A long output's start and end (a compiler names the error first, a traceback last), and
    between them the lines that name an error (a linter's report in the middle of its diffs)."""
    text = (text or "").strip()
    if len(text) <= n:
        return text
    head, tail = text[: n // 4], text[-(n // 2) :]
    middle = text[n // 4 : -(n // 2)]
    keys = [ln.strip()[:300] for ln in middle.splitlines() if KEY_LINE.search(ln)]
    between = "\n".join(dict.fromkeys(keys))[: n - len(head) - len(tail)]
    return f"{head}\n…\n{between}\n…\n{tail}" if between else f"{head}\n…\n{tail}"


def tail(text: str, n: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "…" + text[-n:]
