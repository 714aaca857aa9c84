"""Edits made through the shell are edits (engram.hooks.shell_edits): Codex 0.34's `shell` tool with
apply_patch as its argument or in a heredoc, and `cat > f <<EOF`, `sed -i`, `tee`, `git apply`,
a script's write_text, in every client. The transcripts are synthetic, in the real shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.continuity.fixes import FixTracker
from engram.hooks.formats import read_transcript
from engram.hooks.shell_edits import shell_edits
from engram.hooks.transcript import Session
from engram.hooks.turn_capture import fixes_in

PATCH = (
    "*** Begin Patch\n*** Update File: opk/core/gcode.py\n@@\n-    out = dict(base)\n+    out = dict(g)\n*** End Patch"
)


@pytest.mark.parametrize(
    ("command", "files", "only"),
    [
        (f"apply_patch <<'PATCH'\n{PATCH}\nPATCH", ["opk/core/gcode.py"], True),  # bash -lc heredoc
        (f"apply_patch {PATCH}", ["opk/core/gcode.py"], True),  # ["apply_patch", "<patch>"] joined
        (f"cd web && apply_patch <<'EOF'\n{PATCH}\nEOF", ["web/opk/core/gcode.py"], True),
        ("cat > src/app.py <<'EOF'\nprint('a > b')\nEOF", ["src/app.py"], True),
        ("echo 'node_modules/' >> .gitignore", [".gitignore"], True),
        ("sed -i 's/6669/9998/' scripts/start.sh scripts/stop.sh", ["scripts/start.sh", "scripts/stop.sh"], True),
        ("sed -i '' -e 's/a/b/' src/x.ts", ["src/x.ts"], True),  # BSD sed's empty suffix
        ("perl -pi -e 's/a/b/' lib/x.pl", ["lib/x.pl"], True),
        ("printf 'x\\n' | tee -a notes/todo.md", ["notes/todo.md"], True),
        ("git apply <<'EOF'\ndiff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@\n-a\n+b\nEOF", ["x.py"], True),
        ("python - <<'PY'\nfrom pathlib import Path\nPath('AGENTS.md').write_text('x')\nPY", ["AGENTS.md"], False),
        ("sed -i 's/a/b/' app/cfg.py && pytest -q", ["app/cfg.py"], False),
        ('ssh root@h "opkg list-installed" > out/pkgs.txt', ["out/pkgs.txt"], False),
        ("pytest -q > /dev/null 2>&1", [], False),
        ('grep -n "a > b" src/x.py', [], False),
        ("sed -n '1,80p' src/x.py", [], False),
    ],
)
def test_the_files_a_shell_command_writes(command, files, only):
    found = shell_edits(command)
    assert [f for f, _, _ in found.edits] == files
    assert found.only_edits is only and not found.stray_patch


def test_patch_text_run_as_shell_commands_is_neither_an_edit_nor_a_command():
    assert shell_edits(PATCH).stray_patch and not shell_edits(PATCH).edits
    s = Session(client="codex", timeline=[])
    s.tool("shell", {"command": ["bash", "-lc", PATCH]}, "bash: line 1: @@: command not found\nexit code: 127", True)
    assert s.timeline == [] and s.commands == []


def _codex_034(path: Path, calls: list[tuple[list[str], str]]) -> Path:
    """A Codex 0.34 rollout: the `shell` function with the command as an argument list; the output
    a JSON string with `metadata.exit_code`, or the sandbox's "failed in sandbox" text."""
    lines = [{"type": "session_meta", "payload": {"id": "s", "cwd": "/home/u/opk", "cli_version": "0.34.0"}}]
    for i, (argv, output) in enumerate(calls):
        args = json.dumps({"command": argv, "workdir": "/home/u/opk"})
        lines.append(
            {
                "type": "response_item",
                "payload": {"type": "function_call", "name": "shell", "arguments": args, "call_id": f"c{i}"},
            }
        )
        lines.append(
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": f"c{i}", "output": output}}
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _ok(text: str) -> str:
    return json.dumps({"output": text, "metadata": {"exit_code": 0, "duration_seconds": 0.2}})


FAILING = (
    "failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error, exit code: 1, stdout: "
    ".........F.....  [100%]\n=================================== FAILURES ===================================\n"
    "E       AssertionError: assert 'M240' in ''\n\ntests/test_gcode_utils.py:60: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_gcode_utils.py::test_apply_machine_control_peripherals - AssertionError: assert 'M240' in ''\n"
    "1 failed, 24 passed in 0.31s\n, stderr: "
)


def test_a_codex_0_34_heredoc_patch_is_an_edit_and_fixes_the_failing_test(tmp_path):
    p = _codex_034(
        tmp_path / "rollout.jsonl",
        [
            (["bash", "-lc", "PYTHONPATH=. pytest -q"], FAILING),
            (
                ["bash", "-lc", f"apply_patch << 'PATCH'\n{PATCH}\nPATCH"],
                _ok(
                    "bash: line 7: warning: here-document at line 1 delimited by end-of-file (wanted `PATCH')\n"
                    "Success. Updated the following files:\nM opk/core/gcode.py\n"
                ),
            ),
            (["bash", "-lc", "PYTHONPATH=. pytest -q"], _ok("......................... [100%]\n25 passed in 0.30s\n")),
        ],
    )
    s = read_transcript(p, "codex")
    assert s.files == ["opk/core/gcode.py"]  # the checkpoint's list of edited files
    assert [c.command for c in s.commands] == ["PYTHONPATH=. pytest -q", "PYTHONPATH=. pytest -q"]
    s = Session(client="codex", timeline=[])
    from engram.hooks.formats import READERS

    READERS["codex"](p, s)
    fixes = fixes_in(s.timeline, FixTracker(root="/home/u/opk"), "/home/u/opk")
    assert len(fixes) == 1
    assert [f for f, _ in fixes[0].edits] == ["opk/core/gcode.py"]
    assert "+ out = dict(g)" in fixes[0].content()


def test_a_failed_shell_patch_is_no_edit(tmp_path):
    p = _codex_034(
        tmp_path / "rollout.jsonl",
        [
            (
                ["apply_patch", PATCH],
                "error: Failed to find expected lines in /home/u/opk/opk/core/gcode.py:\n    out = dict(base)",
            ),
        ],
    )
    s = Session(client="codex", timeline=[])
    from engram.hooks.formats import READERS

    READERS["codex"](p, s)
    assert s.files == [] and s.timeline == [] and s.commands == []
