"""What a shell command line runs, read without running it: its program and operands (through
`cd ... &&`, wrappers, pipes and `ssh host '...'`), whether two command lines run the same thing,
whether one is the other changed in a way that can fix it, and whether one only looks.
Used to pair a failing command with the one that later passes (engram.continuity.fixes).
"""

from __future__ import annotations

import re
import shlex

__all__ = [
    "changed_command",
    "cut_heredocs",
    "command_words",
    "segments",
    "program_of",
    "read_only",
    "remote",
    "host_of",
    "talks_to",
    "same_command",
    "shaped",
    "suite_covers",
    "targets",
]

# Programs and wrappers a command is run through, which say nothing of what it does.
WRAPPERS = {"sudo", "env", "time", "uv", "poetry", "npx", "pnpm", "exec", "run", "bunx", "nice"}


# Commands that look and change nothing: run between a failure and its passing again they are not its fix.
READ_ONLY = re.compile(
    r"^\s*(?:ls|cat|head|tail|less|grep|egrep|rg|ag|find|fd|pwd|echo|printf|which|type|whoami|id|env|date|pgrep|"
    r"wc|stat|file|tree|du|df|ps|top|netstat|ss|lsof(?!.*\bkill\b)|dig|nslookup|ping|traceroute|curl|wget|"
    r"git (?:status|diff|log|show|branch|remote|rev-parse|ls-files|blame)|sed -n|awk|jq|sleep|history|uname|"
    r"nvidia-smi|systemctl status|journalctl|logread|docker (?:ps|logs|images|inspect)|kubectl (?:get|describe|logs)|"
    r"nft list|uci (?:show|get)|nc (?:-\w+ )*-\w*z|iptables (?:-[tn] \S+ )*-L|"
    r"ip (?:-\w+ )*(?:addr|route|link|rule)(?: show)?$|"
    r"opkg list\S*|systemctl (?:is-active|is-enabled|list-\S+)|service \S+ status|gpg --list-\S+|"
    r"(?:powershell (?:-\w+ )*)?\(?(?:Get|Test|Select|Measure|Resolve|Format|Sort|Group|Where|ConvertFrom)-\w+)\b"
)
# Output-shaping parts of a command: running with them or without is running the same thing.
SHAPING = re.compile(
    r"\s+\d?>&\d|\s+\d?>\s*/dev/null|\s*\|\s*(?:tail|head|grep|less|tee|cat)\b[^|]*|"
    r"\s+(?:-q|-v|-vv|-x|-s|--quiet|--verbose|--no-header|-rA|-ra|--tb=\S+|--color=\S+|--reporter=\S+)(?=\s|$)"
)


# A variable set for the command (`PYTHONPATH=. pytest`), not an operand holding "=" (`-c "... = 1"`).
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
# Programs whose first word is a subcommand of their own: `git mv a b` then `mv a b` is another
# command, not the same one without a wrapper.
SUBCOMMANDS = {"git", "gh", "npm", "yarn", "pnpm", "docker", "kubectl", "cargo", "go", "pip", "pip3", "brew", "apt"}
SSH_OPTIONS_WITH_VALUE = set("bcDEeFIiJLlmOopQRSWw")
TRIVIAL = {"cd", "sleep", "echo", "export", "source", ".", "set", "true", "pushd", "popd", "clear"}


def segments(command: str) -> list[list[str]]:
    """The simple commands of a command line, each as its words, the pipes kept inside a segment
    (`a | b` is one), split on `&&`, `||`, `;` and newlines outside quotes."""
    command = re.sub(r"\d*>&\d+|&>>?\s*\S+|\|&", " ", command)  # a stream's redirection is not a separator
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    out: list[list[str]] = [[]]
    try:
        for tok in lex:
            if tok in ("&&", "||", ";", "\n", "&", ";;") or tok.startswith(("&&", ";")):
                out.append([])
            else:
                out[-1].append(tok)
    except ValueError:
        return [command.split()]
    return [seg for seg in out if seg]


def command_words(command: str) -> list[str]:
    """The words of the command that does the work: the last simple command that is not a `cd`
    or a `sleep`, its first stage of a pipe, and for `ssh host 'cmd'` the remote command's."""
    segs = [s for s in segments(command.replace("\n", " ; ")) if s[0] not in TRIVIAL] or segments(command) or [[]]
    words = segs[-1]
    if "|" in words:
        words = words[: words.index("|")]
    if words and words[0].rsplit("/", 1)[-1] == "ssh":
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i][1:] and words[i][-1] in SSH_OPTIONS_WITH_VALUE and len(words[i]) == 2 else 1
        if i + 1 < len(words):
            return command_words(" ".join(words[i + 1 :]))
    inner = _wrapped(words)
    return command_words(inner) if inner else words


def _wrapped(words: list[str]) -> str | None:
    """The command an environment wrapper runs: `nix-shell -p x --run 'cmd'`, `nix develop -c cmd`,
    `bash -lc 'cmd'`, `docker compose exec svc cmd`."""
    prog = words[0].rsplit("/", 1)[-1] if words else ""
    if prog == "nix-shell" and "--run" in words[:-1]:
        return words[words.index("--run") + 1]
    if prog in ("bash", "sh", "zsh") and len(words) > 2 and words[1] in ("-c", "-lc", "-ic"):
        return words[2]
    if words[:2] == ["nix", "develop"] and "-c" in words[:-1]:
        return shlex.join(words[words.index("-c") + 1 :])
    return None


def remote(command: str) -> str:
    """The command without an `ssh host` in front of it (what runs there)."""
    host = _host(command)
    if host and host in command:
        return command.split(host, 1)[1]
    return command


def read_only(command: str) -> bool:
    """Whether every simple command of `command` (a remote one through ssh too) only looks."""
    for seg in segments(command.replace("\n", " ; ")):
        if seg[0].rsplit("/", 1)[-1] == "ssh":
            remote_words = _after_host(seg)
            if len(remote_words) == 1 and not read_only(remote_words[0]):  # ssh h 'a && b': each
                return False
            if len(remote_words) != 1 and remote_words and not read_only(shlex.join(remote_words)):
                return False
            continue
        # A subshell's parentheses (`echo x && (systemctl status a || service a status)`) say nothing.
        stages = " ".join(w.strip("()") for w in seg).split(" | ")
        for stage in stages:
            words = command_words(stage)
            if words and words[0] not in TRIVIAL and not READ_ONLY.match(" ".join(words)):
                return False
    return True


def _after_host(words: list[str]) -> list[str]:
    """The words after `ssh [options] host`: the remote command."""
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i][1:] and words[i][-1] in SSH_OPTIONS_WITH_VALUE and len(words[i]) == 2 else 1
    return words[i + 1 :]


def program_of(command: str) -> str:
    """The program a shell command runs (pytest for `python -m pytest`, cargo, npm, git)."""
    words = command_words(command)
    skip = 0
    for i, w in enumerate(words):
        if skip:
            skip -= 1
            continue
        if ASSIGNMENT.match(w) or w in WRAPPERS:
            continue
        if i and words[i - 1] in ("sudo", "env") and w.startswith("-"):
            skip = 1 if w in ("-u", "-g", "-C", "-D", "-U") else 0  # sudo -u mischa op: op
            continue
        name = w.rsplit("/", 1)[-1]
        if re.fullmatch(r"python[\d.]*", name) and "-m" in words[i:]:
            j = words.index("-m", i)
            return words[j + 1] if j + 1 < len(words) else name
        return name[:60] or "shell"
    return "shell"


# A test filter's value made of names joined by `|` (`go test -run "TestA|TestB"`, `jest -t
# "a|b"`): each name is an operand, so running one of them again is running a part of it.
NAME_ALTERNATIVES = re.compile(r"\w+(?:\|\w+)+")


def targets(command: str) -> set[str]:
    """The command's operands: its words that are not options (a test id keeps its file, a
    filter of names joined by `|` gives each name)."""
    out = set()
    for w in command_words(command)[1:]:
        if w.startswith("-") or ASSIGNMENT.match(w) or re.fullmatch(r"\+[a-z][\w=.-]*", w):
            continue  # an option (`dig +short +timeout=3` too)
        out.update(w.split("|") if NAME_ALTERNATIVES.fullmatch(w) else [w.split("::")[0]])
    return out


def _python_script(words: list[str]) -> str | None:
    """The file a Python interpreter runs: `pkg/x.py` for `python pkg/x.py` and for `python -m pkg.x`."""
    words = [w for w in words if not ASSIGNMENT.match(w) and w not in WRAPPERS]
    if not words or not re.fullmatch(r"python[\d.]*", words[0].rsplit("/", 1)[-1]):
        return None
    rest = words[1:]
    if "-m" in rest[:-1]:
        return rest[rest.index("-m") + 1].replace(".", "/") + ".py"
    script = next((w for w in rest if not w.startswith("-")), "")
    return script.removeprefix("./") if script.endswith(".py") else None


def _host(command: str) -> str:
    """Where a command runs: the host of `ssh host 'cmd'`, or "" for here."""
    segs = [s for s in segments(command.replace("\n", " ; ")) if s[0] not in TRIVIAL]
    words = segs[-1] if segs else []
    if words and words[0].rsplit("/", 1)[-1] == "ssh":
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i][1:] and words[i][-1] in SSH_OPTIONS_WITH_VALUE and len(words[i]) == 2 else 1
        return words[i] if i < len(words) else ""
    return ""


def host_of(command: str) -> str:
    """The machine a command runs on: `h` for `ssh root@h 'cmd'`, or "" for here."""
    return _host(command).rsplit("@", 1)[-1]


# The hosts a command talks to over the network: `dig @h`, a URL's host, `ping h`, `nc h 53`.
TALKS_TO = re.compile(r"(?:^|\s)@([\w.:\[\]-]+)|://(?:[^@/\s]*@)?([\w.-]+|\[[^\]\s]+\])")
NETWORK_PROGRAMS = {"ping", "nc", "telnet", "traceroute", "tracert", "nslookup", "host", "mtr"}


def talks_to(command: str) -> set[str]:
    """The hosts `command` reaches over the network (not where it runs)."""
    words = command_words(command)
    out = {a or b for a, b in TALKS_TO.findall(" ".join(words))}
    if words and words[0] in NETWORK_PROGRAMS:
        out |= {w for w in words[1:] if not w.startswith("-") and not w.isdigit()}
    return {h for h in out if h and h not in ("localhost", "127.0.0.1")}


def same_command(failed: str, later: str) -> bool:
    """Whether `later` runs what `failed` ran again: the same program on the same host and the same
    operands, or on a part or a superset of them (`pytest tests/a.py::t` then `pytest tests/a.py -q`),
    the same command without a wrapper in front (`rtk bun run test` then `bun run test`), or the
    same Python file run as a module or as a script."""
    if " ".join(failed.split()) == " ".join(later.split()):
        return True
    if "<<" in failed or "<<" in later:
        # A script fed by a heredoc: another script is another command. A heredoc that only
        # writes a message (`git commit -m "$(cat <<EOF ...)" && git push`) is not what runs last.
        failed, later = cut_heredocs(failed)[0], cut_heredocs(later)[0]
        if any(re.fullmatch(r"<<\d+", w) for w in command_words(failed) + command_words(later)):
            return False
        if " ".join(failed.split()) == " ".join(later.split()):
            return True
    if _host(failed) != _host(later):
        return False
    a_words, b_words = command_words(failed), command_words(later)
    if a_words and b_words and (_unwrapped(a_words, b_words) or _unwrapped(b_words, a_words)):
        return True
    script = _python_script(a_words)
    if script and script == _python_script(b_words):
        return True  # `python -m x` and `python x.py` run one file
    if program_of(failed) != program_of(later):
        return False
    a, b = targets(failed), targets(later)
    return not a or not b or a <= b or b <= a


HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][\w-]*)\2")


def cut_heredocs(command: str) -> tuple[str, list[str]]:
    """The command with each heredoc's body taken out (its line ends with `<<N` for body N)."""
    bodies: list[str] = []
    out: list[str] = []
    lines = command.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        marks = list(HEREDOC.finditer(line))
        if not marks:
            out.append(line)
            continue
        for m in marks:
            strip_tabs, word = m.group(1) == "-", m.group(3)
            body = []
            while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]).strip() != word:
                body.append(lines[i])
                i += 1
            i += 1  # the closing word (or the end: a heredoc left open still feeds its body)
            line = line.replace(m.group(0), f"<<{len(bodies)}", 1)
            bodies.append("\n".join(body))
        out.append(line)
    return "\n".join(out), bodies


def _unwrapped(outer: list[str], inner: list[str]) -> bool:
    """Whether `outer` is `inner` with a wrapper in front (`rtk bun run test`, `bun run test`)."""
    return outer[1:] == inner and outer[0].rsplit("/", 1)[-1] not in SUBCOMMANDS


def shaped(command: str) -> str:
    """A command without what only shapes its output (`2>&1`, `| tail -5`, `-q`), whitespace normalised."""
    return " ".join(SHAPING.sub("", " ".join(command.split())).split())


def _all_words(command: str) -> list[str]:
    return [w for seg in segments(shaped(command).replace("\n", " ; ")) for w in seg]


def changed_command(failed: str, passed: str) -> bool:
    """Whether `passed` runs what `failed` ran in a changed way that can be the fix: with a
    variable set (`PYTHONPATH=.`), an option added, another program or interpreter in front (a
    venv's python, without a wrapper), or a command before it (`git pull --rebase && git push`).
    Not the same run again, a part of it, or the same with a filter dropped."""
    if shaped(failed) == shaped(passed):
        return False
    fw, pw = command_words(failed), command_words(passed)
    if fw and pw and _unwrapped(fw, pw):
        return True  # the same without the wrapper in front (`rtk bun run test`, then `bun run test`)
    a, b = targets(failed), targets(passed)
    if not a <= b:
        return False  # running only some of it is not a fix
    before, after = _all_words(failed), _all_words(passed)
    added = [w for w in after if w not in before]
    return bool(
        any(w.startswith("-") or re.match(r"[A-Za-z_]\w*=", w) for w in added)
        or (fw and pw and fw[0] != pw[0])
        or len(segments(passed)) > len(segments(failed))
    )


# What a run checks, by the words that name it: the tests, a build, a lint.
RUN_KINDS = [
    ("test", re.compile(r"^(?:tests?|pytest|jest|vitest|mocha|spec)(?::[\w-]+)?$")),
    ("build", re.compile(r"^(?:build|compile|tsc)(?::[\w-]+)?$")),
    ("lint", re.compile(r"^(?:lint|vet|clippy|eslint|ruff|golangci-lint)(?::[\w-]+)?$")),
]
# Programs that run a project's own tasks (`mise run test`, `make test`, `npm test`): the task
# runs the project's test runner, whatever it is.
TASK_RUNNERS = {"make", "just", "mise", "task", "npm", "yarn", "pnpm", "bun", "tox", "nox", "rake", "gradle", "gradlew"}
WHOLE = {".", "./...", "...", "all", "run"}  # operands that select everything, or say "run"


def _kind(words: list[str]) -> str | None:
    for kind, pattern in RUN_KINDS:
        if any(pattern.match(w.rsplit("/", 1)[-1]) for w in words):
            return kind
    return None


def suite_covers(suite: str, failed: str) -> bool:
    """Whether `suite` runs a project's whole suite of the kind `failed` ran a part of: `mise run
    test` or `go test ./...` after `go test ./session -run TestX`, on the same host, by the same
    program or by a task runner. Passing, it passes what failed too."""
    if _host(suite) != _host(failed):
        return False
    sw, fw = command_words(suite), command_words(failed)
    kind = _kind(sw)
    if kind is None or kind != _kind(fw):
        return False
    if program_of(suite) != program_of(failed) and program_of(suite) not in TASK_RUNNERS:
        return False
    rest = {t for t in targets(suite) if not any(p.match(t) for _, p in RUN_KINDS)}
    return rest <= WHOLE
