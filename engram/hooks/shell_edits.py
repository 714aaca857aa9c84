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

import ast
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
# A script naming a file once and writing it later: `path = Path("ui/index.html")` then
# `path.write_text(text)` or `open(path, "w")`.
SCRIPT_PATH_VAR = re.compile(r"""\b(\w+)\s*=\s*(?:pathlib\.)?Path\(\s*['"]([^'"]+)['"]\s*\)""")
# A script's lines that only read and write the file, not what it changes in it: left out of the
# edit's text, so the hunk shows the replacements.
SCRIPT_PLUMBING = re.compile(
    r"^\s*(?:from [\w.]+ import [\w, ]+|import [\w., ]+|\w+\s*=\s*(?:pathlib\.)?Path\([^)]*\)|"
    r"\w+\s*=\s*\w+\.read_text\([^)]*\)|\w+\.write_text\(\w+\))\s*$"
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
        script = body or segment
        changes = "\n".join(ln for ln in script.splitlines() if not SCRIPT_PLUMBING.match(ln)) or script
        written = [next(g for g in m.groups() if g) for m in SCRIPT_WRITES.finditer(script)]
        for var, path in SCRIPT_PATH_VAR.findall(script):
            if re.search(rf"""\b{var}\.write_(?:text|bytes)\(|\bopen\(\s*{var}\s*,\s*['"][wa]""", script):
                written.append(path)
        written = list(dict.fromkeys(written))
        replaced = _replacements(script) if prog.startswith("python") and len(written) == 1 else []
        if replaced:  # one file, changed by `text.replace(old, new)`: those are its changes
            return [(_joined(cwd, written[0]), old, new) for old, new in replaced if _a_file(written[0])]
        found += [(path, changes) for path in written]
    return [(_joined(cwd, f), "", new) for f, new in found if _a_file(f)]


def _replacements(script: str) -> list[tuple[str, str]]:
    """The (old, new) text of each `.replace(old, new)` a Python script makes with literal strings
    (written in the call or assigned to a name first), read without running it."""
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return []
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            names.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})

    def text(arg: ast.expr) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        return names.get(arg.id) if isinstance(arg, ast.Name) else None

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace":
            pair = [text(a) for a in node.args[:2]]
            if len(pair) == 2 and pair[0] is not None and pair[1] is not None and pair[0] != pair[1]:
                out.append((pair[0], pair[1]))
    return out


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
