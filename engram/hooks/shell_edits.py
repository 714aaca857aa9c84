"""The files a shell command writes: edits an agent makes through its shell tool.

Codex 0.34 had only a `shell` tool, so every edit went through it: `apply_patch` as the command's
argument (`["apply_patch", "*** Begin Patch ..."]`) or in a heredoc (`bash -lc "apply_patch <<'PATCH'
..."`); later agents of every client still write files with `cat > f <<EOF`, `sed -i`, `tee`,
`git apply` or a script's `write_text`. These count as edits of the files they name, for the
pitfalls (engram.continuity.fixes) and for the checkpoint's list of edited files.

Read without running anything: heredoc bodies are cut out first (so what they hold is not taken
for commands), then each simple command is looked at on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engram.continuity.shell_commands import cut_heredocs, segments

__all__ = ["ShellEdits", "patch_edits", "shell_edits"]

NOT_FILES = ("/dev/", "/proc/", "$", "&")
# A script writing a file: Python's write_text / open(..., "w"), Node's writeFileSync.
SCRIPT_WRITES = re.compile(
    r"""(?:Path\(\s*['"]([^'"]+)['"]\s*\)\.write_(?:text|bytes)"""
    r"""|open\(\s*['"]([^'"]+)['"]\s*,\s*['"][wa]"""
    r"""|writeFileSync\(\s*['"]([^'"]+)['"])"""
)
PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.M)
GIT_DIFF_FILE = re.compile(r"^\+\+\+ b/(\S+)", re.M)
# Commands that set up an edit without running anything of the project.
SETUP = {"cd", "mkdir", "touch", "true", "set", "pushd", "popd", "export"}
WRITERS = {"cat", "echo", "printf"}


@dataclass
class ShellEdits:
    """What a shell command writes: (file, old, new) per change, whether the command does
    nothing but write files (then it is an edit, not a command to run), and whether it is patch
    text sent to the shell by mistake (neither)."""

    edits: list[tuple[str, str, str]]
    only_edits: bool = False
    stray_patch: bool = False
    # The files are written before anything else runs (`sed -i ... && pytest`), not by what runs
    # (`python - <<PY` writing files, `pytest | tee log`): then they come after the command.
    before: bool = True


def patch_edits(patch: str) -> list[tuple[str, str, str]]:
    """(file, removed lines, added lines) of each file an apply_patch envelope adds, updates or
    deletes (a deleted file: no added lines)."""
    out = []
    heads = list(PATCH_FILE.finditer(patch))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(patch)
        body = patch[m.end() : end].splitlines()
        old = "\n".join(ln[1:] for ln in body if ln.startswith("-"))
        new = "\n".join(ln[1:] for ln in body if ln.startswith("+") and not ln.startswith("+++"))
        path = m.group(2).strip()
        if m.group(1) == "Delete":
            old, new = old or f"(deleted {path})", ""
        out.append((path, old, new))
    return out


def _joined(cwd: str | None, path: str) -> str:
    if cwd and not path.startswith(("/", "~")) and cwd not in (".", "./"):
        return f"{cwd.rstrip('/')}/{path}"
    return path


def _a_file(word: str) -> bool:
    """Whether a word can be a file's name (not a variable, a glob, a quote or a script)."""
    return bool(word) and not word.startswith(NOT_FILES) and not re.search(r"[$*?`'\"\\\n{}()<>]", word)


def _redirects(words: list[str]) -> list[str]:
    """The files `> f` and `>> f` write (not `2>`, `>&2`, `&>`)."""
    out = []
    for i, w in enumerate(words):
        m = re.fullmatch(r">{1,2}(.*)", w)
        if not m:
            continue
        target = m.group(1) or (words[i + 1] if i + 1 < len(words) else "")
        if not target.startswith("&"):
            out.append(target)
    return out


def _simple_edits(words: list[str], bodies: list[str], cwd: str | None) -> list[tuple[str, str, str]]:
    """The edits one simple command makes (sed -i, perl -pi, tee, git apply, a redirection, a
    script's write), from its words (its heredoc's body named by a `<<N` word)."""
    segment = " ".join(words)
    body = ""
    marks = [int(m.group(1)) for w in words if (m := re.fullmatch(r"<<(\d+)", w))]
    if marks and marks[0] < len(bodies):
        body = bodies[marks[0]]
    prog = words[0].rsplit("/", 1)[-1] if words else ""
    found: list[tuple[str, str]] = []  # (file, what it writes)
    if prog in ("sed", "perl") and any(
        w.startswith("-i") or w == "--in-place" or (prog == "perl" and re.fullmatch(r"-\w*i\w*", w)) for w in words
    ):
        args, script = [], ""
        skip = False
        for j, w in enumerate(words[1:], 1):
            if skip:
                skip = False
                continue
            if w in ("-e", "--expression"):
                script += words[j + 1] + "\n" if j + 1 < len(words) else ""
                skip = True
            elif w.startswith("-") or (w == "" and words[j - 1] == "-i"):
                continue
            else:
                args.append(w)
        if not script and args:
            script, args = args[0], args[1:]
        found += [(f, script.strip() or segment) for f in args]
    elif prog == "tee":
        found += [(w, body or segment) for w in words[1:] if not w.startswith("-")]
    elif prog == "git" and len(words) > 1 and words[1] == "apply":
        found += [(f, body) for f in dict.fromkeys(GIT_DIFF_FILE.findall(body))]
    found += [(t, body or segment) for t in _redirects(words)]
    if prog.startswith(("python", "node")) or prog in ("bun", "deno"):
        for m in SCRIPT_WRITES.finditer(body or segment):
            found.append((next(g for g in m.groups() if g), body or segment))
    return [(_joined(cwd, f), "", new) for f, new in found if _a_file(f)]


def shell_edits(command: str) -> ShellEdits:
    """The files `command` writes and what it writes to them."""
    if "*** Begin Patch" in command:
        lead = command.split("*** Begin Patch", 1)[0]
        if "apply_patch" not in lead and "applypatch" not in lead:
            return ShellEdits([], stray_patch=True)  # patch text run as shell commands: fails
        cd = re.search(r"\bcd\s+(\S+)\s*&&", lead)
        patch = command[command.index("*** Begin Patch") :]
        patch = patch.split("*** End Patch", 1)[0]
        patched = [(_joined(cd.group(1) if cd else None, f), o, n) for f, o, n in patch_edits(patch)]
        return ShellEdits(patched, only_edits=True)
    text, bodies = cut_heredocs(command)
    edits: list[tuple[str, str, str]] = []
    only = True
    before: bool | None = None
    cwd: str | None = None
    for words in segments(text.replace("\n", " ; ")):
        for stage in _stages(words):
            while stage and ("=" in stage[0].split("/")[0] or stage[0] in ("sudo", "env", "command")):
                stage = stage[1:]  # an assignment or a wrapper before the program
            if not stage:
                continue
            found = _simple_edits(stage, bodies, cwd)
            edits += found
            prog = stage[0].rsplit("/", 1)[-1]
            if prog == "cd" and len(stage) > 1:
                cwd = _joined(cwd, stage[1])
            if not found and prog not in SETUP and prog not in WRITERS:
                only = False
            writer = prog in WRITERS | {"sed", "perl"} or stage[:2] == ["git", "apply"]
            if found and not (writer or prog == "tee"):
                only = False  # a program's output sent to a file: the program ran
            if before is None and prog not in SETUP:
                before = bool(found) and writer
    return ShellEdits(edits, only_edits=only and bool(edits), before=bool(before))


def _stages(words: list[str]) -> list[list[str]]:
    """The stages of a pipe (`a | b`)."""
    out: list[list[str]] = [[]]
    for w in words:
        if w == "|":
            out.append([])
        else:
            out[-1].append(w)
    return [s for s in out if s]
