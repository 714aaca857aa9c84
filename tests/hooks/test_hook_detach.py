"""The hooks' fast path for Codex and Gemini CLI (engram/hooks/detach.sh, and the plugins' launcher
with --detach) run as a client runs it: it returns with no output before the command it starts
has finished, hands that command the event's JSON on its stdin, and leaves no file behind."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from engram.hooks.plugins import DETACH

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "plugins" / "codex" / "bin" / "engram-launch"
EVENT = b'{"session_id": "s1", "transcript_path": "/t/rollout.jsonl", "cwd": "/r", "hook_event_name": "Stop"}'
# Stands for `engram hook`: waits until the test opens the gate, then keeps its stdin, its
# arguments and the plugin's mark where the test can read them.
RECORDER = """#!/bin/sh
read _ <"$GATE"
cat >"$OUT.part"
echo "$* via=$ENGRAM_VIA_PLUGIN" >"$OUT.args"
mv "$OUT.part" "$OUT"
"""


def wait_until(cond, timeout: float = 30.0):
    """cond()'s first true value; waits on the state (the detached command's files), not a time."""
    end, tick = time.monotonic() + timeout, threading.Event()
    while time.monotonic() < end:
        if value := cond():
            return value
        tick.wait(0.02)
    pytest.fail(f"not within {timeout:g}s")


@pytest.fixture
def recorder(tmp_path):
    gate, out, tmp = tmp_path / "gate", tmp_path / "out", tmp_path / "tmp"
    os.mkfifo(gate)
    tmp.mkdir()
    script = tmp_path / "engram"
    script.write_text(RECORDER)
    script.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "GATE": str(gate), "OUT": str(out), "TMPDIR": str(tmp)}
    return script, env, gate, out, tmp


def detached(argv: list[str], env: dict, recorder) -> tuple[str, str]:
    """Run the fast path as a client does; return the detached command's stdin and arguments."""
    _, _, gate, out, tmp = recorder
    r = subprocess.run(argv, input=EVENT, env=env, capture_output=True, timeout=30)
    # Returned, silent and successful while the command still waits at its gate.
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"") and not out.exists()
    [kept] = list(tmp.iterdir())  # the event, kept where only its owner can read it
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    with open(gate, "w") as g:
        g.write("go\n")
    wait_until(out.exists)
    wait_until(lambda: not any(tmp.iterdir()))  # removed once the command is done
    return out.read_bytes().decode(), (out.parent / "out.args").read_text()


def test_detach_sh_hands_the_event_to_the_command_and_returns_at_once(recorder):
    script, env, *_ = recorder
    stdin, args = detached(["/bin/sh", str(DETACH), str(script), "hook", "Stop", "--client", "codex"], env, recorder)
    assert stdin == EVENT.decode()
    assert args == "hook Stop --client codex via=\n"


def test_the_plugin_launcher_detaches_the_same_way(recorder):
    script, env, *_ = recorder
    stdin, args = detached(
        [str(LAUNCHER), "--detach", "hook", "AfterAgent", "--client", "gemini"],
        {**env, "ENGRAM_BIN": str(script)},
        recorder,
    )
    assert stdin == EVENT.decode()
    assert args == "hook AfterAgent --client gemini via=1\n"  # still marked as the plugin's own run


def test_without_a_private_file_the_command_runs_in_the_foreground(tmp_path):
    out = tmp_path / "out"
    script = tmp_path / "engram"
    script.write_text(f'#!/bin/sh\ncat >"{out}"\n')
    script.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path / "missing")}
    r = subprocess.run(
        ["/bin/sh", str(DETACH), str(script), "hook", "Stop"], input=EVENT, env=env, capture_output=True, timeout=30
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert out.read_bytes() == EVENT  # nothing lost: it waited for the command instead
