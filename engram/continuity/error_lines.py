"""What an error says, read from a command's output or a prompt the user pasted it into: the most
specific line that names it (the failing test, the compiler's or linter's rule and place, the
exception and its message), the file:line it points at, the lines that say more, and a problem
told in words. engram.continuity.fixes pairs these errors with what fixed them.
"""

from __future__ import annotations

import re

from engram.continuity.fix_places import ANSI

__all__ = [
    "NOISE",
    "error_detail",
    "error_signature",
    "pasted_errors",
    "reported_problems",
    "same_error",
    "conflicted_files",
    "missing_program",
    "short",
    "suggested_commands",
]


# The line that names the error, most specific first: the failing test's name, then a compiler's
# or linter's coded error with its location, then an exception and its message, before a generic
# "error:", which a wrapper (npm, make, go test) prints around the real one. Each pattern says
# whether its first or its last hit is the one (a traceback's exception comes last).
SIGNATURES: list[tuple[re.Pattern, str]] = [
    (re.compile(p, re.M), which)
    for p, which in (
        (r"^(FAILED \S+::\S+(?: - .*)?)$", "first"),  # pytest's short summary
        (r"^\s*(--- FAIL: \S+)", "first"),  # go test
        (r"^\s*\u25cf ((?:[^\n\u203a]+ \u203a )+[^\n]+)$", "first"),  # jest: ● suite › test
        (r"^\s*(?:FAIL|\u00d7|\u2717)\s+(\S+\.(?:test|spec)\.\w+ > .+)$", "first"),  # vitest
        (r"^(.*\S\(\d+,\d+\): error TS\d+: .+|.*:\d+:\d+ - error TS\d+: .+)$", "first"),  # tsc with its file
        (r"((?:error|warning) TS\d+: .+)$", "first"),  # tsc
        (
            r"^\s*(?:at )?([\w./@-]+:\d+:\d+:? (?:[A-Z]+\d+ .+|lint/\S+.*))$",
            "first",
        ),  # ruff, flake8, biome: file:line:col CODE
        (r"^\s*(?:at )?([\w./@-]+\.\w+ (?:format|organizeImports|assist/\S+)) ", "first"),  # biome: a file to reformat
        (r"^\s*(\d+:\d+\s+error\s+.+)$", "first"),  # eslint: line:col error message rule
        (r"^(error\[E\d{4}\]: .+)$", "first"),  # rustc
        (r"^((?:\./)?[\w./-]+\.go:\d+(?::\d+)?: .+)$", "first"),  # go build / vet
        (
            r"^\s*(?:E\s+|(?:\S+:\d+ )?Uncaught (?:\(in promise\) )?|\[Error\] )?"
            r"((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?)$",
            "last",
        ),  # Python, Java, JavaScript: the exception and its message
        (r"^(CONFLICT \([^)]*\): .+)$", "first"),  # git merge, rebase: the file left in conflict
        (r"^(panic: .+)$", "first"),  # Go
        (r"^\[ERROR\] (.*(?:\.java:\[\d+,\d+\]|\u00bb).*)$", "first"),  # maven: a compiler error or a test's
        (r"^\s*(! \[(?:remote )?rejected\] .+)$", "first"),  # git push: the ref and why
        # A CLI told it was called wrong (cobra's gh, docker, kubectl print it bare, then their usage
        # text, whose flag descriptions say "failed" and "error" too).
        (
            r"^((?:Error: )?(?:unknown (?:shorthand )?flag|unknown command|flag needs an argument|"
            r"(?:accepts|requires) (?:at most |at least |exactly |between )?[\d ]+(?:and \d+ )?arg\(s\)).*)$",
            "first",
        ),
        (r"^(?:> )?(error: .+)$", "first"),  # cargo, gradle, git, many CLIs
        (r"^(Error: .+)$", "first"),  # node, docker compose, many CLIs
        (r"^((?:fatal|error|ERROR|FATAL|\[ERROR\]): .+)$", "first"),  # git, make, compilers
        (
            r"^((?:[\w./-]+: )?(?:line \d+: )?[\w./-]+: "
            r"(?:command not found|No such file or directory|Permission denied|not found))$",
            "first",
        ),
        (r"^(.*(?:: unbound variable|\*\*\* .+ Stop\.))$", "first"),  # bash set -u, make
        (r"^(.*(?:yaml|YAML|json|JSON|toml|TOML)[^\n]*(?:line|column) \d+.*)$", "first"),  # config parse errors
        (r"^((?:npm|yarn|pnpm) (?:ERR!|error) .+)$", "first"),
        (r"^([\w.-]+ : .+)$(?=\n\s*At (?:line:|\S+:\d+ char:))", "first"),  # PowerShell: Cmdlet : message
        # A script's own failure line, marked as one: `❌ Failed to start Turso`, `❌ Falha ao iniciar`.
        (r"^\s*((?:\u274c|\u2717|\u2718) ?.*\b(?:[Ff]ail|[Ee]rro|[Ff]alha)\w*\b.*)$", "first"),
        (
            r"^(.*\b(?:failed|Failed|FAILED|error|Error|ERROR|refused|denied)\b.*)$",
            "first",
        ),  # anything saying it failed
    )
]
COMPOSE_PREFIX = re.compile(r"(?m)^[\w.-]+-\d+\s+\|\s?")
EXCEPTION_AT = next(i for i, (p, which) in enumerate(SIGNATURES) if which == "last")
# Lines that only wrap the real error: a runner's or a client's note that something failed.
WRAPPER = re.compile(
    r"(?i)\bexit(?: status|ed with(?: exit)? code| code)\b|context deadline exceeded|\btask (?:\S+ )?failed\b|"
    r"command failed\b|\bELIFECYCLE\b|npm ERR! (?:code|errno|path|command|A complete log)|"
    r"Process completed with exit code|\*\*\* \[.*\] Error \d+|error: script \".*\" exited|"
    r"\bfailed in sandbox\b|^\s*(?:Found|with) \d+ errors?\b|^\s*\d+ (?:failed|errors?)\b|"
    r"^(?:Test Files|Tests|Test Suites):? .*failed|^FAIL\s*$|^FAIL\s+\S+\s+[\d.]+s$|^ERROR: .*exit code|"
    r"^error: Recipe .* failed|^Error: Process completed|run failed|build failed|^ERROR\s*$|\bsee above\b|"
    r"^\s*(?:at |File \")|Traceback \(most recent call last\)|^\$ |: \(none\)$|^(?:Command|Directory): "
    r"|^(?:Process Group PGID|Background PIDs|Signal): "  # Gemini CLI's shell result trailer
    r"|^\s*\+ (?:FullyQualifiedErrorId|CategoryInfo) *:|^\s*\+ "  # PowerShell's record after its message
)
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


def short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _plain(text: str) -> str:
    """Output without colour codes and without docker compose's `service-1  | ` in front of lines."""
    return COMPOSE_PREFIX.sub("", ANSI.sub("", text or ""))


def error_signature(output: str) -> tuple[str, str | None]:
    """The most specific line of a command's output that names its error (the failing test, the
    compiler's or linter's rule and place, the exception and its message; a wrapper's "exit status
    1" only when nothing else says more), and the file:line it points at."""
    text = _plain(output)
    sig = ""
    for pattern, which in SIGNATURES:
        found = [m.group(1).strip() for m in pattern.finditer(text)]
        found = [f for f in found if f and not WRAPPER.search(f)]
        if found:
            sig = found[-1] if which == "last" else found[0]
            break
    if not sig:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not EXIT_LINE.match(ln.strip())]
        # Nothing printed but the client's exit note (`curl -s` that cannot connect): that note.
        note = next((ln.strip() for ln in text.splitlines() if EXIT_LINE.match(ln.strip())), "")
        sig = next(
            (ln for ln in reversed(lines) if not WRAPPER.search(ln)),
            lines[-1] if lines else (f"failed ({note})" if note else "failed"),
        )
    where = None
    for pattern in LOCATIONS:
        hits = pattern.findall(text)
        hits = [h for h in hits if "site-packages" not in h[0] and "node_modules" not in h[0]]
        if hits:
            f, line = hits[-1] if pattern is LOCATIONS[0] else hits[0]
            where = f"{f}:{line}"
            break
    return short(sig, 300), where


# Lines of a pasted error that no command printed: a browser's warning or network error code.
PASTED_EXTRA: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^\s*(?:\S+:\d+ )?(Warning: .+)$", re.M), "first"),  # React, after the console's source:line
    (re.compile(r"\b(ERR_[A-Z][A-Z_]{3,}\b.*)$", re.M), "first"),  # Chrome: net::ERR_UNSAFE_PORT
    # An uncaught exception quoted inside a sentence ("blank screen: Uncaught ReferenceError: ...").
    (re.compile(r"\b(Uncaught (?:\(in promise\) )?[A-Z]\w*(?:Error|Exception)\b.*)$", re.M), "first"),
    # A log line at level error (a server's, a browser console's, a CLI's): from its level on.
    (
        re.compile(r"(?:^|\s)((?:\[(?:ERROR|Error|error|FATAL)\][ :]+|\b(?:ERROR|FATAL)(?::| \[))\s*\S.*)$", re.M),
        "first",
    ),
    # A program's own complaint: `grep: unrecognized option: line-buffered`, `bash: x: command not found`.
    (
        re.compile(
            r"^\s*((?:[\w.-]+: )+(?:unrecognized|invalid|unknown|illegal|cannot|can't|unable|failed|error)\b.+)$",
            re.M | re.I,
        ),
        "first",
    ),
    # A chain of causes (Go, Docker's build): `failed to solve: rpc error: ...: no such file or directory`.
    (re.compile(r"\b((?:failed to|unable to) [^:\n]{1,60}: [^\n]*(?:: [^\n]+){1,})$", re.M), "first"),
]


def pasted_errors(text: str, most: int = 3) -> list[tuple[str, str | None]]:
    """The headlines of the errors the user pasted into a prompt (a traceback, a browser console's
    errors, a CI log's failing steps), each with the file:line it points at; none when the prompt
    holds none: only lines a specific pattern finds count, not one merely saying something failed."""
    body = _plain(text)
    for pattern, which in [*SIGNATURES[:-1], *PASTED_EXTRA]:
        found = [m.group(1).strip() for m in pattern.finditer(body)]
        found = [f for f in dict.fromkeys(found) if f and not WRAPPER.search(f)]
        if found:
            found = found[::-1] if which == "last" else found
            where = error_signature(body)[1]
            return [(short(sig, 300), where) for sig in found[:most]]
    return _introduced_error(text)


# A prompt that says it holds an error ("Getting this error from API …", "I see a console error:"):
# the user vouches for what follows, so a line merely saying it failed is the headline, or after a
# colon or a line break, the first line of it. Not "same error" (told again), nor "this error" with
# nothing after it, nor words after it ("this error happens when …": a report in words).
ERROR_INTRO = re.compile(
    r"(?i)\b(?:(?:got|getting|seeing) )?(?:this|these|the following|an?|new|console|browser) (?:errors?|exceptions?)\b"
    r"(?: message)?"
    r"(?: (?:from|in|on) [\w.-]+(?: [\w.-]+)?)?|\b(?:got|getting|seeing) this\b"
)
INTRO_CHARS = 200  # where the prompt says what it holds: its start
INTRODUCED_LINE = 20  # a first line shorter than this is the user's words, not what they pasted


def _introduced_error(text: str) -> list[tuple[str, str | None]]:
    intro = ERROR_INTRO.search(text[:INTRO_CHARS])
    if not intro:
        return []
    after = text[intro.end() :]
    pasted = re.match(r"\s*(?::|\n)", after) is not None  # "error:" or the paste on the next line
    rest = _plain(after.strip().lstrip(":|").strip())
    generic = SIGNATURES[-1][0].search(rest)
    line = generic.group(1).strip() if generic else ""
    if not line and pasted:
        line = next((ln.strip() for ln in rest.splitlines() if ln.strip()), "")
    if len(line) < INTRODUCED_LINE:
        return []
    return [(short(line, 300), error_signature(rest)[1])]


# A sentence of the user's telling that something of the project misbehaves, without an error
# pasted: what goes wrong ("gets stuck", "a blank screen") or what does not happen ("does not
# receive events", "cannot log in"). A request that something not happen is no report.
REPORTED = re.compile(
    r"(?i)\b(?:gets? stuck|getting stuck|is stuck|are stuck|stuck (?:on|at|in)|(?:get|getting|gets|got) "
    r"(?:disconnected|logged out|kicked)|blank (?:screen|page)|crash(?:es|ed|ing)\b|hangs\b|freez(?:es|ing)\b|"
    r"(?:does not|doesn'?t|did not|didn'?t|do not|don'?t|cannot|can'?t|can not|isn'?t|is not|aren'?t|are not|"
    r"won'?t|never|nothing)\s+(?:\w+\s+){0,3}?(?:work(?:s|ing)?|appear\w*|show(?:s|ing)? up|load\w*|open\w*|"
    r"receiv\w*|recei\w*|progress\w*|reach\w*|accessi?ble|accesible|connect\w*|start\w*|render\w*|"
    r"respond\w*|drag\w*|fire[sd]?|log(?:ged)? ?in|happen\w*|be reached|see (?:it|them|the|any))\b)"
)
NOT_A_REPORT = re.compile(
    r"(?i)\b(?:make (?:it|sure)|so (?:that|it)|should(?:n'?t| not)?|want|ensure|please add|add an?|"
    r"implement|instead of|if (?:it|the|a))\b|\?\s*$"
)
REPORT_CHARS = 600  # a longer prompt is a task, a document or a log, not a report in words


def reported_problems(text: str) -> list[tuple[str, str | None]]:
    """The sentence of a short prompt that tells a problem in words (`When I refresh my browser, I
    get disconnected and the table gets stuck`), as a pasted error's headline; none in a request."""
    from engram.text.statements import sentences

    if len(text) > REPORT_CHARS:
        return []
    for sentence in sentences(" ".join(text.split())):
        if REPORTED.search(sentence) and not NOT_A_REPORT.search(sentence):
            return [(short(sentence.strip(), 200), None)]
    return []


# A command an error's output tells to run, quoted (`(e.g., 'git pull ...')`, "Run `npm audit
# fix`") or after "run:" ("To log in, run: gh auth login").
SUGGESTED = re.compile(r"[`'\"]([a-z][\w.-]* [^`'\"\n]{1,80})[`'\"]|\b[Rr]un:\s+([a-z][\w.-]*(?: [\w.:/=@-]+){1,3})")
SUGGESTED_WORDS = 3


def suggested_commands(output: str, program: str) -> list[list[str]]:
    """The commands of `program` the output of its failure tells to run, each as its first words
    (options and placeholders left out): [["git", "pull"]] for git's hint after a rejected push."""
    found = []
    for m in SUGGESTED.finditer(output or ""):
        words = (m.group(1) or m.group(2)).split()
        if words[0].rsplit("/", 1)[-1] != program or "--help" in words or "help" in words:
            continue  # another program's, or where to read more
        words = [w for w in words if not w.startswith(("-", "<", "[", "...", "…")) and "..." not in w]
        if len(words) > 1 and words[:SUGGESTED_WORDS] not in found:
            found.append(words[:SUGGESTED_WORDS])
    return found


MISSING_PROGRAM = re.compile(
    r"(?:^|[\s:])([\w.+-]+): command not found$|command not found: ([\w.+-]+)$|"
    r"^'([\w.+-]+)' is not recognized as an internal or external command|"
    r"exec: \"([\w.+-]+)\": executable file not found"
)


def missing_program(signature: str) -> str | None:
    """The program an error says is not installed (`bash: gh: command not found`: gh)."""
    m = MISSING_PROGRAM.search(signature or "")
    return next((g for g in m.groups() if g), None) if m else None


CONFLICT_IN = re.compile(r"^CONFLICT \([^)]*\): (?:Merge conflict in )?(\S+)", re.M)


def conflicted_files(output: str) -> list[str]:
    """The files a merge, rebase or cherry-pick left in conflict, as git names them."""
    return list(dict.fromkeys(CONFLICT_IN.findall(output or "")))


def same_error(a: str, b: str) -> bool:
    return NOISE.sub("#", re.sub(r"\d+", "#", a.lower())) == NOISE.sub("#", re.sub(r"\d+", "#", b.lower()))


def error_detail(output: str, signature: str) -> str:
    """Up to three more lines of the output that say what went wrong (a compiler's note, an
    expected/received pair), which a recurrence may quote instead of the signature's line."""
    keep = re.compile(
        r"(?i)\b(?:error|expected|received|found|caused|conflict|symbol|because|depends|"
        r"not found|no such|cannot|unable|invalid|refused|denied)\b"
    )
    out = []
    text = _plain(output)
    exception, _ = SIGNATURES[EXCEPTION_AT]
    raised = [m.group(1).strip() for m in exception.finditer(text)]
    if raised and raised[-1] not in signature:
        out.append(short(raised[-1], 200))  # the exception behind a test's FAILED line
    # A linter's rule on a line of its own, after a message that spans lines (golangci-lint's
    # goconst quotes a string with its newlines): the rule names the error better than its place.
    if LOCATED.match(signature) and not LINT_RULE.search(signature):
        after = text[text.find(signature.split("`")[0]) :] if signature.split("`")[0] in text else ""
        rule = LINT_RULE.search("\n".join(after.splitlines()[:8]))
        if rule:
            out.append(short(rule.group(0).strip(), 200))
    # The other errors a compiler or a test run reported with it (Go and tsc list several): each
    # message once, whatever line it is at (four "cannot use ..." and then "redeclared").
    said = {_message(signature)} | {_message(o) for o in out}
    for pattern, _ in SIGNATURES[:EXCEPTION_AT]:
        for m in pattern.finditer(text):
            line = short(m.group(1).strip(), 200)
            if line and line not in signature and signature not in line and _message(line) not in said:
                out.append(line)
                said.add(_message(line))
    for line in (output or "").splitlines():
        line = line.strip()
        if line and keep.search(line) and line not in signature and _message(short(line, 200)) not in said:
            out.append(short(line, 200))
            said.add(_message(out[-1]))
    return " | ".join(out[:3])


# A compiler's or linter's place in front of its message, and a linter's rule after it.
LOCATED = re.compile(r"^\s*(?:\./)?[\w./@-]+\.\w+:\d+(?::\d+)?:\s*")
LINT_RULE = re.compile(r"^.*\((?:[a-z][\w-]*)\)\s*$", re.M)


def _message(line: str) -> str:
    """An error line without the place it is at: the same error elsewhere is the same message."""
    return LOCATED.sub("", line).strip().lower()
