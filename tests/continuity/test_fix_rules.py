"""Which error -> fix pairs are credited, and under which headline (engram.continuity.fixes): an
edit must touch what failed, the pass must be real, a changed command is a fix too, and the
headline is the error's most specific line. Synthetic outputs in the real tools' shapes."""

from __future__ import annotations

import pytest

from engram.api import Api
from engram.continuity.fixes import FixTracker, error_signature
from engram.core.types import Ctx
from engram.hooks.transcript import Session
from engram.hooks.turn_capture import fixes_in

PYTEST_FAIL = (
    "....F...                                                                 [100%]\n"
    "=================================== FAILURES ===================================\n"
    "______________________________ test_split ______________________________\n"
    "    def test_split():\n>       assert split(10, 3) == [4, 3, 3]\n"
    "E       AssertionError: assert [3, 3, 3] == [4, 3, 3]\n"
    "tests/test_money.py:7: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_money.py::test_split - AssertionError: assert [3, 3, 3] == [4, 3, 3]\n"
    "1 failed, 7 passed in 0.12s"
)


def test_an_edit_counts_only_when_it_touches_what_failed():
    t = FixTracker(root="/r")
    t.command("pytest -q", True, PYTEST_FAIL)
    t.edit("docs/README.md", "old\n", "new\n")  # unrelated to the failing test
    assert t.command("pytest -q", False) is None  # passed with no edit that touches it: not a fix
    t = FixTracker(root="/r")
    t.command("pytest -q", True, PYTEST_FAIL)
    t.edit("docs/README.md", "old\n", "new\n")
    t.edit("money/split.py", "    return [share] * parts\n", "    return [share + rest] + [share] * (parts - 1)\n")
    fix = t.command("pytest -q", False)
    assert fix is not None and [f for f, _ in fix.edits] == ["money/split.py"]  # the test's module only
    assert fix.signature.startswith("FAILED tests/test_money.py::test_split")


@pytest.mark.parametrize(
    ("command", "output", "edited"),
    [
        ("npm install", "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree", "package.json"),
        ("cargo check", "error[E0432]: unresolved import `serde_json`\n --> src/main.rs:2:5", "Cargo.toml"),
        ("make test", "Makefile:7: *** missing separator.  Stop.", "Makefile"),
        ("python manage.py test orders", "OperationalError: no such column: orders_order.shipped_at", "orders/m.py"),
        (
            "mvn test -Dtest=OrderServiceTest",
            '[ERROR] OrderServiceTest.cancelsUnpaid:41 » NullPointer Cannot invoke "com.acme.Customer.getEmail()"',
            "src/main/java/com/acme/OrderService.java",
        ),
    ],
)
def test_edits_the_error_does_not_name_but_plausibly_touch_it(command, output, edited):
    # A program's own manifest, the app a test command names, a test class's class, a Java package.
    t = FixTracker()
    t.command(command, True, output)
    t.edit("notes/TODO.md", "a\n", "b\n")
    assert t.command(command, False) is None  # an edit elsewhere is not its fix
    t = FixTracker()
    t.command(command, True, output)
    t.edit("notes/TODO.md", "a\n", "b\n")
    t.edit(edited, "a\n", "b\n")
    fix = t.command(command, False)
    assert fix is not None and [f for f, _ in fix.edits] == [edited]


def test_a_pass_that_was_cut_off_or_killed_is_not_a_pass():
    t = FixTracker()
    t.command("npm run dev", True, "Error: listen EADDRINUSE: address already in use :::3000")
    t.edit("server.js", "listen(3000)\n", "listen(3001)\n")
    assert t.command("npm run dev", False, unfinished=True) is None  # a server stopped by the time limit
    assert len(t.state()) == 1  # still waiting for a real pass


def test_the_reader_marks_timeouts_and_background_runs_and_drops_rejected_calls():
    s = Session(client="claude-code", timeline=[])
    s.tool("Bash", {"command": "npm run dev"}, "Command timed out after 2m 0.0s\n> next dev\n  ▲ Ready", True)
    s.tool(
        "Bash",
        {"command": "rm -rf build"},
        "The user doesn't want to proceed with this tool use. The tool use was rejected",
        True,
    )
    s.tool(  # Claude Code cancels the calls beside one that failed: they never ran
        "Bash",
        {"command": "git log --oneline -3"},
        "<tool_use_error>Cancelled: parallel tool call Bash(git-ai stats --json) errored</tool_use_error>",
        True,
    )
    s.tool("exec_command", {"cmd": "npm run dev"}, "Process running with session ID 51677\n> vite", False)
    s.tool("Bash", {"command": "grep -rn TODO src"}, "Exit code 1", True)  # found nothing: an answer
    assert [(e["command"], e["failed"], e.get("unfinished", False)) for e in s.timeline] == [
        ("npm run dev", False, True),
        ("grep -rn TODO src", False, False),
    ]
    assert s.running == {"51677": ("npm run dev", "> vite")}  # Codex's, waiting for its write_stdin calls


def test_gemini_clis_frame_around_a_commands_output_is_not_the_error():
    s = Session(client="gemini", timeline=[])
    out = (
        "Command: gh auth status\nDirectory: (root)\nOutput: bash: line 1: gh: command not found\n"
        "Error: (none)\nExit Code: 127\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 4242"
    )
    s.tool("run_shell_command", {"command": "gh auth status"}, out, False)
    # Other versions of the client start the frame at its output.
    out = "Output: fatal: not under version control, source=notes.txt\nExit Code: 128\nProcess Group PGID: 14184"
    s.tool("run_shell_command", {"command": "git mv notes.txt docs/notes.txt"}, out, False)
    first, second = s.timeline
    assert first["failed"] and error_signature(first["output"])[0] == "bash: line 1: gh: command not found"
    assert error_signature(second["output"])[0] == "fatal: not under version control, source=notes.txt"


def test_a_changed_command_is_the_fix():
    t = FixTracker()
    t.command("pytest -q", True, "E   ModuleNotFoundError: No module named 'opk'\n1 error in 0.1s")
    fix = t.command("PYTHONPATH=. pytest -q", False)
    assert fix is not None and not fix.edits and fix.signature == "ModuleNotFoundError: No module named 'opk'"
    assert "Fixed by running `PYTHONPATH=. pytest -q` instead" in fix.content()
    t = FixTracker()
    t.command("git push", True, "! [rejected]        main -> main (fetch first)\nerror: failed to push some refs")
    fix = t.command("git pull --rebase && git push", False)
    assert fix is not None and "git pull --rebase && git push" in fix.content()


@pytest.mark.parametrize(
    ("failed", "passed"),
    [
        ("pytest -q", "pytest -q tests/test_a.py"),  # only a part of it
        ("pytest -q", "pytest -q 2>&1 | tail -5"),  # the same run, its output shortened
        ('ssh root@h "ps | grep dnsmasq | grep -v grep"', 'ssh root@h "ps | grep dnsmasq"'),  # a filter dropped
        ("dig a.com @10.0.0.1 +short", 'ssh root@h "dig a.com @10.0.0.1 -p 5335"'),  # run elsewhere
    ],
)
def test_a_command_that_is_not_a_changed_version_of_the_failing_one_is_no_fix(failed, passed):
    from engram.continuity.shell_commands import changed_command, same_command

    assert not (same_command(failed, passed) and changed_command(failed, passed))
    t = FixTracker()
    t.command(failed, True, "error: something failed")
    assert t.command(passed, False) is None


def test_a_command_run_in_between_that_shares_the_failures_words_is_its_fix():
    t = FixTracker()
    t.command("npm run dev", True, "Error: listen EADDRINUSE: address already in use :::3000")
    t.command("lsof -ti :3000", False)  # only looks
    t.command("git commit -am wip", False)  # changes something, unrelated
    t.command("lsof -ti :3000 | xargs kill -9", False)
    fix = t.command("npm run dev", False)
    assert fix is not None and fix.fix_commands == ("lsof -ti :3000 | xargs kill -9",)
    assert "Fixed by running `lsof -ti :3000 | xargs kill -9`" in fix.content()


@pytest.mark.parametrize(
    ("output", "headline"),
    [
        (
            # pytest --tb=native: the exception's line comes before the summary naming the test
            'Traceback (most recent call last):\n  File "tests/test_money.py", line 7, in test_split\n'
            "AssertionError: assert [3, 3, 3] == [4, 3, 3]\n"
            "FAILED tests/test_money.py::test_split - AssertionError: assert [3, 3, 3] == [4, 3, 3]",
            "FAILED tests/test_money.py::test_split - AssertionError: assert [3, 3, 3] == [4, 3, 3]",
        ),
        (
            "=== RUN   TestParse\n--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got 1\nFAIL\n"
            "FAIL\texample.com/p\t0.01s\nexit status 1",
            "--- FAIL: TestParse",
        ),
        (
            'task: Failed to run task "test": exit status 1\n--- FAIL: TestLoad (30.00s)\n'
            "    load_test.go:40: context deadline exceeded",
            "--- FAIL: TestLoad",
        ),
        (
            " FAIL  src/cart.test.ts > Cart > adds an item\nAssertionError: expected 1 to be 2\n"
            " Test Files  1 failed (1)",
            "src/cart.test.ts > Cart > adds an item",
        ),
        (
            "src/api.ts(14,7): error TS2345: Argument of type 'string' is not assignable to type 'number'.",
            "src/api.ts(14,7): error TS2345: Argument of type 'string' is not assignable to type 'number'.",
        ),
        (
            "frontend/src/Tab.tsx:3:10 lint/correctness/noUnusedImports  FIXABLE  ━━━━\n"
            '$ biome check --error-on-warnings\nerror: script "lint" exited with code 1',
            "frontend/src/Tab.tsx:3:10 lint/correctness/noUnusedImports FIXABLE ━━━━",
        ),
        (
            "npm ERR! code ELIFECYCLE\nnpm ERR! errno 1\nnpm ERR! web@1.0.0 build: `vite build`",
            "npm ERR! web@1.0.0 build: `vite build`",
        ),
    ],
)
def test_the_headline_is_the_most_specific_line(output, headline):
    assert error_signature(output)[0] == headline


def test_a_command_fix_is_stored_as_a_pitfall(eng):
    t = FixTracker()
    t.command("pytest -q", True, "E   ModuleNotFoundError: No module named 'opk'")
    fix = t.command("PYTHONPATH=. pytest -q", False)
    out = Api(eng).call("session_capture", {"fixes": [fix.to_dict()]}, Ctx(session_id="s", project="example.com/p"))
    assert out["fixes"] == 1
    [m] = eng.list_memories(memory_type="failure", in_project="example.com/p")["memories"]
    stored = eng.get(m["id"])
    assert "PYTHONPATH=. pytest -q" in stored.content and "pitfall" in stored.tags


def test_codex_shell_edits_feed_the_tracker_as_edits():
    s = Session(client="codex", timeline=[])
    s.tool("shell", {"command": ["bash", "-lc", "pytest -q"]}, PYTEST_FAIL + "\nexit code: 1", True)
    s.tool(
        "shell", {"command": ["bash", "-lc", "sed -i 's/share] \\* parts/share + rest]/' money/split.py"]}, "", False
    )
    s.tool("shell", {"command": ["bash", "-lc", "pytest -q"]}, "8 passed", False)
    [fix] = fixes_in(s.timeline, FixTracker(), None)
    assert [f for f, _ in fix.edits] == ["money/split.py"]


BROWSER = (
    "the tree view crashes when I open the Context tab:\n\n"
    "Uncaught ContextError: useContext returned `undefined`. Seems you forgot to wrap component within "
    "<ChakraProvider />\n    at useSlotRecipe (chunk-ABC.js?v=1:88:11)\n"
    "    at ContextTreeView (http://localhost:5173/src/components/ContextTreeView.tsx?t=17:12:5)"
)


def test_an_error_the_user_pastes_and_the_agent_fixes_by_editing_is_a_pitfall():
    t = FixTracker(root="/r")
    assert t.request(BROWSER) == []
    t.edit("src/theme.ts", "a\n", "b\n")
    t.edit(
        "/r/src/components/ContextTreeView.tsx",
        "import { TreeView } from '@chakra-ui/react'\n",
        "import { TreeView } from '@ark-ui/react/tree-view'\n",
    )
    [fix] = t.request("Seems to work. Now add a search box.")  # not pasted again: settled as fixed
    assert fix.origin == "user-pasted"
    assert fix.signature.startswith("ContextError: useContext returned `undefined`")
    assert [f for f, _ in fix.edits] == ["src/theme.ts", "/r/src/components/ContextTreeView.tsx"]  # the turn's
    assert "pasted by the user" in fix.content() and "@ark-ui/react/tree-view" in fix.content()


def test_a_pasted_error_pasted_again_was_not_fixed_and_a_prompt_without_one_is_none():
    t = FixTracker()
    t.request(
        'Traceback (most recent call last):\n  File "opk/ui/pdl_editor.py", line 323\n'
        "AttributeError: 'PDLForm' object has no attribute 'g_start'"
    )
    t.edit("opk/ui/pdl_editor.py", "a\n", "b\n")
    # The same error again: those edits did not fix it.
    assert t.request("still:\nAttributeError: 'PDLForm' object has no attribute 'g_start'") == []
    assert t.request("Add a button that saves the profile; errors should be shown in red.") == []  # no edit since
    t = FixTracker()
    assert t.request("Please make the failing tests pass and tell me what failed.") == []
    assert t.state() == []


def test_a_pasted_error_fix_is_stored_and_comes_from_the_transcripts_prompts(eng):
    s = Session(client="claude-code", timeline=[])
    s.request(BROWSER)
    s.tool(
        "Edit",
        {"file_path": "src/components/ContextTreeView.tsx", "old_string": "x\n", "new_string": "y\n"},
        "ok",
        False,
    )
    s.answer("Switched the tree view to the unstyled Ark UI component.")
    s.request("Works now, thanks. Next: the export button.")
    [fix] = fixes_in(s.timeline, FixTracker(), None)
    out = Api(eng).call("session_capture", {"fixes": [fix.to_dict()]}, Ctx(session_id="s", project="example.com/p"))
    assert out["fixes"] == 1
    [m] = eng.list_memories(memory_type="failure", in_project="example.com/p")["memories"]
    assert "origin:user-pasted" in m["tags"] and "ChakraProvider" in eng.get(m["id"]).content


def test_several_pasted_errors_are_one_pitfall_each_fixed_by_the_turns_edits():
    t = FixTracker()
    t.request(
        "pnpm build fails:\n"
        "apps/api/src/ws/chatHub.ts:2:23 - error TS7016: Could not find a declaration file for module 'ws'.\n"
        "apps/api/src/services/tableState.ts:60:36 - error TS2345: Argument of type '{ status: string; }' is not "
        "assignable to parameter of type 'TableState'."
    )
    t.edit("apps/api/package.json", '  "devDependencies": {\n', '  "devDependencies": {\n    "@types/ws": "^8.5.10",\n')
    t.edit("apps/api/src/services/tableState.ts", "function startHand(t) {\n", "function startHand(t): TableState {\n")
    fixes = t.request("Builds now. Next, the lobby page.")
    by_error = {f.signature.split(" - ")[1][:12]: [p for p, _ in f.edits] for f in fixes}
    turn = ["apps/api/package.json", "apps/api/src/services/tableState.ts"]
    assert by_error == {"error TS7016": turn, "error TS2345": turn}


def test_a_failure_hidden_by_a_pipe_and_a_look_that_finds_nothing():
    s = Session(client="claude-code", timeline=[])
    out = "cmd/x/a.go:47:38: cannot use s (variable of type string) as []byte value\nFAIL\tentire.io/cli [build failed]"
    s.tool("Bash", {"command": "mise run test 2>&1 | tail -20"}, out, False)  # exit 0: tail's
    assert s.timeline[-1]["failed"]
    t = FixTracker()
    assert t.command("ls .specify/templates/commands", True, "ls: .specify/templates/commands: No such file") is None
    assert t.state() == []


def test_the_agents_shell_failing_and_a_test_run_in_between_are_not_errors_or_fixes():
    t = FixTracker()
    noise = "      0 [main] bash (22008) child_copy: cygheap read copy failed, 0x0..0x800020EF0, Win32 error 299"
    assert t.command("ssh root@h 'netstat -tulnp'", True, noise) is None and t.state() == []
    t.command("mise run test:ci", True, "--- FAIL: TestShadow_CommitBeforeStop (0.20s)\nFAIL")
    t.command("go test -run TestShadow_CommitBeforeStop ./integration_test/ -v", False)  # looks again, changes nothing
    assert t.command("mise run test:ci", False) is None


def test_the_exception_behind_a_failed_tests_line_is_kept_and_a_long_outputs_middle_is_read():
    out = (
        'FAILED tests/test_cli.py::test_rules - File "/home/u/opk/cli/__main__.py", line 333\n'
        "E     IndentationError: unexpected indent"
    )
    t = FixTracker()
    t.command("pytest -q", True, out)
    t.edit("opk/cli/__main__.py", "  x = 1\n", "x = 1\n")
    fix = t.command("pytest -q", False)
    assert fix is not None and "IndentationError: unexpected indent" in fix.content()
    s = Session(client="claude-code", timeline=[])
    biome = "frontend/src/Tab.tsx:3:10 lint/correctness/noUnusedImports  FIXABLE  ━━━━━"
    long = "$ biome check\n" + "  │ line of a diff\n" * 400 + biome + "\n" + "  │ more diff\n" * 400 + "Found 1 error."
    s.tool("Bash", {"command": "bun run lint"}, long + "\nExit code 1", True)
    assert error_signature(s.timeline[-1]["output"])[0].startswith("frontend/src/Tab.tsx:3:10 lint/correctness")


def test_what_a_script_writes_when_it_runs_is_not_a_fix_of_its_own_failure():
    s = Session(client="codex", timeline=[])
    script = "node <<'NODE'\nconst fs = require('fs');\nfs.writeFileSync('ui/vite.config.ts', cfg)\nNODE"
    s.tool("exec_command", {"cmd": script}, "SyntaxError: Unexpected token '.'\nProcess exited with code 1", True)
    s.tool("exec_command", {"cmd": script.replace("cfg", "cfg2")}, "", False)
    assert [e["k"] for e in s.timeline] == ["command", "command", "edit"]
    assert fixes_in(s.timeline, FixTracker(), None) == []


def _codex_item(payload: dict) -> dict:
    return {"type": "response_item", "payload": payload}


def test_a_codex_exec_command_left_running_finishes_in_its_write_stdin_calls(tmp_path):
    """Codex 0.98+: exec_command returns "Process running with session ID N" after its yield time;
    write_stdin polls bring the rest of the output and "Process exited with code N"."""
    import json as _json

    from engram.hooks.formats import READERS

    def call(i, name, args, output):
        return [
            _codex_item({"type": "function_call", "name": name, "arguments": _json.dumps(args), "call_id": f"c{i}"}),
            _codex_item({"type": "function_call_output", "call_id": f"c{i}", "output": output}),
        ]

    head = "Chunk ID: 1\nWall time: 1.0 seconds\n"
    cargo = "nix-shell -p cargo rustc --run 'cargo check --manifest-path kernel/Cargo.toml'"
    lines = [
        *call(
            0,
            "exec_command",
            {"cmd": "cargo check --manifest-path kernel/Cargo.toml"},
            head + "Process exited with code 127\nOutput:\nbash: line 1: cargo: command not found\n",
        ),
        *call(
            1, "exec_command", {"cmd": cargo}, head + "Process running with session ID 51677\nOutput:\n  Checking k\n"
        ),
        *call(
            2,
            "write_stdin",
            {"session_id": 51677, "chars": ""},
            head + "Process exited with code 101\nOutput:\nerror[E0382]: use of moved value: `sender`\n"
            " --> kernel/src/main.rs:40:9\n",
        ),
        *call(3, "apply_patch", {}, ""),
        *call(4, "exec_command", {"cmd": cargo}, head + "Process running with session ID 7\nOutput:\n"),
        *call(
            5, "write_stdin", {"session_id": 7, "chars": ""}, head + "Process exited with code 0\nOutput:\nFinished\n"
        ),
    ]
    patch = "*** Begin Patch\n*** Update File: kernel/src/main.rs\n@@\n-a(sender)\n+a(sender.clone())\n*** End Patch"
    lines[6]["payload"] = {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c3", "input": patch}
    p = tmp_path / "rollout.jsonl"
    p.write_text("".join(_json.dumps(x) + "\n" for x in lines))
    s = Session(client="codex", timeline=[])
    READERS["codex"](p, s)
    assert [(e["command"][:12], e["failed"]) for e in s.timeline if e["k"] == "command"] == [
        ("cargo check ", True),
        ("nix-shell -p", True),
        ("nix-shell -p", False),
    ]
    fixes = fixes_in(s.timeline, FixTracker(), None)
    # The wrapper got past "command not found" (its fix is the changed command); the edit fixed E0382.
    assert [(f.signature, [x for x, _ in f.edits]) for f in fixes] == [
        ("bash: line 1: cargo: command not found", []),
        ("error[E0382]: use of moved value: `sender`", ["kernel/src/main.rs"]),
    ]
    assert f"Fixed by running `{cargo}` instead" in fixes[0].content()


def test_same_error_said_again_keeps_a_pasted_error_open_and_git_push_rejection_is_the_headline():
    t = FixTracker()
    t.request("getting a blank screen: Uncaught ReferenceError: global is not defined")
    t.edit("ui/src/main.tsx", "a\n", "b\n")
    assert t.request("same error. killed and restarted `just dev`") == []  # not fixed yet
    t.edit("ui/index.html", "<head>\n", "<head>\n<script>window.global = window</script>\n")
    [fix] = t.request("that worked! now the nodes")
    assert fix.signature == "Uncaught ReferenceError: global is not defined"
    assert "ui/index.html" in [f for f, _ in fix.edits]
    out = (
        "To github.com:me/repo.git\n ! [rejected]        main -> main (fetch first)\n"
        "error: failed to push some refs to 'github.com:me/repo.git'\nhint: Updates were rejected"
    )
    assert error_signature(out)[0] == "! [rejected] main -> main (fetch first)"


def test_another_script_fed_by_a_heredoc_is_another_command():
    from engram.continuity.shell_commands import same_command

    assert not same_command("node <<'NODE'\nfs.writeFileSync(a)\nNODE", "node <<'NODE'\nfs.writeFileSync(b)\nNODE")


def test_docker_composes_service_prefix_is_not_part_of_the_error():
    out = "poker-ui-1  | Error: Cannot find module '/app/apps/ui/server.js'\npoker-ui-1 exited with code 1"
    assert error_signature(out)[0] == "Error: Cannot find module '/app/apps/ui/server.js'"


def test_the_other_errors_a_compiler_reported_with_the_first_are_kept():
    out = (
        "# entire.io/cli/strategy\n"
        "strategy/attribution.go:47:38: cannot use content (variable of type string) as []byte value\n"
        "strategy/attribution.go:137:6: countLines redeclared in this block\n"
        "FAIL\tentire.io/cli/strategy [build failed]"
    )
    t = FixTracker()
    t.command("go test ./strategy", True, out)
    t.edit("strategy/attribution.go", "func countLines(s string) int {\n", "func countLinesStr(s string) int {\n")
    fix = t.command("go test ./strategy", False)
    assert fix.signature.startswith("strategy/attribution.go:47:38: cannot use content")
    assert "countLines redeclared in this block" in fix.content()


def test_gemini_shells_trailer_is_no_headline():
    # Gemini CLI's run_shell_command result ends with lines about the process, not the error.
    output = (
        "Command: git mv notes.txt docs/notes.txt\nDirectory: (root)\nStdout: (empty)\n"
        "Stderr: fatal: destination exists, source=notes.txt, destination=docs/notes.txt\n"
        "Error: (none)\nExit Code: 128\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 14184"
    )
    assert "destination exists" in error_signature(output)[0]


# ---------------------------------------------------------------- rules measured on real sessions (issue 45)


def test_an_error_got_past_with_another_error_is_fixed_by_the_edits_that_touch_it():
    # A fix in steps: the script fails on an import, the import is fixed, the same script then fails
    # further on (a missing column): the first error is past, credited to the edit that touched it.
    t = FixTracker(root="/r")
    import_error = (
        'Traceback (most recent call last):\n  File "/r/agent/store.py", line 3, in <module>\n'
        "    import sqlite_utils\nModuleNotFoundError: No module named 'sqlite_utils'"
    )
    assert t.command("python run_checks.py", True, import_error) is None
    t.edit("agent/store.py", "import sqlite_utils\n", "import sqlite3\n")
    t.edit("docs/NOTES.md", "a\n", "b\n")  # touches nothing the error names
    column_error = (
        'Traceback (most recent call last):\n  File "/r/agent/store.py", line 40, in load\n'
        "sqlite3.OperationalError: no such column: session_id"
    )
    fix = t.command("python run_checks.py", True, column_error)
    assert fix is not None and fix.moved_on
    assert fix.signature == "ModuleNotFoundError: No module named 'sqlite_utils'"
    assert [f for f, _ in fix.edits] == ["agent/store.py"]
    assert "got past this error" in fix.content()
    # The new error waits with no edits of its own; the edit that fixes it is its fix.
    t.edit("agent/store.py", "SELECT session_id FROM runs\n", "SELECT id FROM runs\n")
    second = t.command("python run_checks.py", False)
    assert second is not None and not second.moved_on and "no such column: session_id" in second.signature


def test_the_same_error_again_is_not_got_past():
    t = FixTracker(root="/r")
    out = "src/app.go:12:2: undefined: loadConfig"
    t.command("go build ./...", True, out)
    t.edit("src/app.go", "loadConfig()\n", "loadConfg()\n")
    assert t.command("go build ./...", True, out.replace(":12:2", ":13:2")) is None  # same message, another line


def test_a_commit_message_heredoc_does_not_make_the_push_another_command():
    from engram.continuity.shell_commands import same_command

    commit_and_push = (
        "git add src/cli.go && git commit -m \"$(cat <<'EOF'\nInline the helper\n\nIt had one caller.\nEOF\n)\""
        " && git push 2>&1"
    )
    assert same_command(commit_and_push, "git push 2>&1")
    # A script fed by a heredoc is still another script when its body differs.
    assert not same_command("python - <<'PY'\nprint(1)\nPY", "python - <<'PY'\nprint(2)\nPY")


def test_sudo_options_are_not_the_program():
    from engram.continuity.shell_commands import program_of

    assert program_of("sudo -u mischa op vault list") == "op"
    assert program_of("sudo -E legion_gui") == "legion_gui"


def test_an_errors_detail_lists_each_other_message_once_and_a_linters_rule():
    from engram.continuity.fixes import error_detail

    go = (
        "# acme/cli/strategy\n"
        "strategy/attr.go:47:38: cannot use content (variable of type string) as []byte value in argument to count\n"
        "strategy/attr.go:104:21: cannot use content (variable of type string) as []byte value in argument to count\n"
        "strategy/attr.go:137:6: count redeclared in this block\n"
        "FAIL\tacme/cli/strategy [build failed]"
    )
    sig, _ = error_signature(go)
    assert "cannot use content" in sig and "count redeclared in this block" in error_detail(go, sig)
    lint = (
        "strategy/attribution_test.go:8:13: string `alpha\nbeta\n` has 4 occurrences, make it a constant (goconst)\n"
        '\tcontent := "alpha\\nbeta\\n"\n1 issues:\n* goconst: 1'
    )
    sig, _ = error_signature(lint)
    assert "(goconst)" in error_detail(lint, sig)


@pytest.mark.parametrize(
    ("failed", "output", "passed"),
    [
        ("git mv notes.txt docs/notes.txt", "fatal: not under version control, source=notes.txt", "mv notes.txt docs/"),
        (
            "git -C /src/wt/old-branch status",
            "fatal: cannot change to '/src/wt/old-branch': No such file or directory",
            "git status",
        ),
        ("gh pr list --author-login me", "unknown flag: --author-login", "gh pr list --author me"),
    ],
)
def test_a_command_called_wrong_and_called_right_next_is_a_slip(failed, output, passed):
    t = FixTracker(root="/src")
    t.command(failed, True, output)
    assert t.command(passed, False) is None


GH_RUN_VIEW_USAGE = """
Usage:  gh run view [<run-id>] [flags]

Flags:
  -a, --attempt uint      The attempt number of the workflow run
      --exit-status       Exit with non-zero status if run failed
  -j, --job string        View a specific job ID from a run
      --log               View full log for either a run or specific job
      --log-failed        View the log for any failed steps in a run or specific job
  -v, --verbose           Show job steps
"""


@pytest.mark.parametrize(
    ("output", "headline"),
    [
        ("unknown flag: --status" + GH_RUN_VIEW_USAGE, "unknown flag: --status"),
        ("accepts at most 1 arg(s), received 2" + GH_RUN_VIEW_USAGE, "accepts at most 1 arg(s), received 2"),
        (
            'Error: unknown command "lgos" for "kubectl"\n\nDid you mean this?\n\tlogs',
            'Error: unknown command "lgos" for "kubectl"',
        ),
    ],
)
def test_a_cli_called_wrong_is_headed_by_its_complaint_not_its_usage_text(output, headline):
    # The usage text after the complaint describes flags with "failed" in them: it is not the error.
    assert error_signature(output)[0] == headline
    t = FixTracker(root="/src")
    t.command("gh run view 123 --failed", True, output)
    assert t.command("gh run view 123 --log-failed", False) is None  # called right next: a slip


def test_a_slip_fixed_by_an_edit_is_still_a_pitfall():
    # The project's own script lacked the option: editing the script is a lesson about the project.
    t = FixTracker(root="/r")
    t.command("./scripts/release.sh --dry-run", True, "./scripts/release.sh: unknown option: --dry-run")
    t.edit("scripts/release.sh", "case $1 in\n", "case $1 in\n  --dry-run) DRY=1 ;;\n")
    fix = t.command("./scripts/release.sh --dry-run", False)
    assert fix is not None and [f for f, _ in fix.edits] == ["scripts/release.sh"]


def test_dropping_git_in_front_is_another_command_not_an_unwrapped_one():
    from engram.continuity.shell_commands import changed_command, same_command

    assert not same_command("git mv a.txt b.txt", "mv a.txt b.txt")
    assert not changed_command("git mv a.txt b.txt", "mv a.txt b.txt")
    assert changed_command("rtk bun run test", "bun run test")  # a wrapper dropped: the fix


@pytest.mark.parametrize(
    ("prompt", "headline"),
    [
        (
            "I'm getting this from docker compose up failed to solve: rpc error: code = Unknown desc = failed to "
            "read dockerfile: open /var/lib/docker/tmp/buildkit-mount9/Dockerfile: no such file or directory",
            "failed to solve: rpc error: code = Unknown desc = failed to read dockerfile: open "
            "/var/lib/docker/tmp/buildkit-mount9/Dockerfile: no such file or directory",
        ),
        (
            "login fails: shop-auth-1 | 2026-02-01 10:00:01,502 ERROR [org.auth.services] (worker-1) AUTH0095: "
            "Client is not allowed to use the implicit flow.",
            "ERROR [org.auth.services] (worker-1) AUTH0095: Client is not allowed to use the implicit flow.",
        ),
        ("[Error] Failed to load resource: Origin null is not allowed. (app.js, line 0)", None),
        ("the launcher says\ngrep: unrecognized option: line-buffered\nUsage: grep [-HhnlLoqvsrRiwFE]", None),
        ("deu erro?\n🚀 Starting agents...\n✅ Port 9999 is available\n❌ Failed to start Billing\n", None),
    ],
)
def test_pasted_errors_in_the_shapes_users_paste_them(prompt, headline):
    from engram.continuity.fixes import pasted_errors

    found = pasted_errors(prompt)
    assert found, prompt
    if headline:
        assert found[0][0] == headline
    assert not pasted_errors("ERROR on gate failures or unresolved clarifications, then continue.")  # a kit's prose


def test_a_problem_told_in_words_and_fixed_by_edits_is_a_pitfall():
    t = FixTracker(root="/r")
    assert t.request("When I reload the page, I get logged out and the cart gets stuck") == []
    t.edit("web/src/session.ts", "storage = memory\n", "storage = localStorage\n")
    fixes = t.request("great, now add a checkout button")  # the problem is not told again: fixed
    assert len(fixes) == 1 and fixes[0].origin == "user-pasted"
    assert fixes[0].signature == "When I reload the page, I get logged out and the cart gets stuck"
    assert [f for f, _ in fixes[0].edits] == ["web/src/session.ts"]


@pytest.mark.parametrize(
    "prompt",
    [
        "make it so the banner doesn't show on mobile",  # a request
        "Why doesn't the cache get invalidated?",  # a question
        "add a retry so the upload does not fail on a flaky network",
    ],
)
def test_a_request_or_a_question_is_no_reported_problem(prompt):
    from engram.continuity.fixes import reported_problems

    assert reported_problems(prompt) == []


def test_a_problem_told_again_is_not_fixed_yet():
    t = FixTracker(root="/r")
    t.request("The list does not load after I sign in")
    t.edit("web/src/list.ts", "a\n", "b\n")
    assert t.request("nope, still doesn't load") == []  # told again: the edits did not fix it
    t.edit("web/src/api.ts", "c\n", "d\n")
    fixes = t.request("works now, thanks. Next: dark mode")
    assert len(fixes) == 1 and [f for f, _ in fixes[0].edits] == ["web/src/api.ts"]  # the edit after it


def test_psql_errors_it_exits_zero_after_are_a_failure():
    s = Session(client="claude-code", timeline=[])
    out = (
        'CREATE TABLE\npsql:db/migrations/001_posts.sql:26: ERROR:  foreign key constraint "posts_author_fkey" '
        'cannot be implemented\nDETAIL:  Key columns "author_id" and "id" are of incompatible types: integer and uuid.'
    )
    s.tool("Bash", {"command": "psql -d blog -f db/migrations/001_posts.sql"}, out, False)
    assert s.timeline[0]["failed"]
    assert "posts_author_fkey" in error_signature(s.timeline[0]["output"])[0]


def test_an_operand_holding_an_equals_sign_is_not_a_variable():
    from engram.continuity.shell_commands import same_command, targets

    query = "psql -d blog -c \"SELECT id FROM users WHERE name = 'x'\""
    assert "SELECT id FROM users WHERE name = 'x'" in targets(query)
    assert not same_command("psql -d blog -f db/migrations/001_posts.sql", query)


def test_powershell_headline_is_the_cmdlet_and_its_message():
    out = (
        "Resolve-DnsName : example.com : This operation returned because the timeout period expired\n"
        "At line:1 char:1\n+ Resolve-DnsName example.com -Server 10.0.0.1 -DnsOnly\n+ ~~~~~~~~~~~~~~~\n"
        "    + CategoryInfo          : OperationTimeout: (example.com:String) [Resolve-DnsName], Win32Exception\n"
        "    + FullyQualifiedErrorId : ERROR_TIMEOUT,Microsoft.DnsClient.Commands.ResolveDnsName"
    )
    assert error_signature(out)[0] == (
        "Resolve-DnsName : example.com : This operation returned because the timeout period expired"
    )


def test_a_pasted_error_waits_for_its_first_edit():
    # The user pastes a browser error, the agent asks, the user answers how to fix it; the edits
    # come only after that answer and fix the error pasted before.
    t = FixTracker(root="/r")
    t.request("the page says: This site can't be reached. Error code: ERR_UNSAFE_PORT")
    assert t.request("ok, put it on 9998") == []  # nothing edited yet: it keeps waiting
    t.edit("scripts/start.sh", "PORT=6669\n", "PORT=9998\n")
    fixes = t.request("works. now the logs page")
    assert len(fixes) == 1 and fixes[0].signature.startswith("ERR_UNSAFE_PORT")
    assert [f for f, _ in fixes[0].edits] == ["scripts/start.sh"]
    # Never edited for: dropped after two more prompts, not credited to a later edit.
    t = FixTracker(root="/r")
    t.request("the page says: Error code: ERR_UNSAFE_PORT")
    for prompt in ("what port is that?", "ok", "fine, leave it"):
        assert t.request(prompt) == []
    t.edit("README.md", "a\n", "b\n")
    assert t.request("thanks") == []


def test_a_run_that_fails_on_is_fixed_by_a_command_only_when_it_names_the_error():
    missing = "ImportError: TaskStore requires SQLAlchemy and a database driver"
    t = FixTracker(root="/r")
    t.command("uv run python check.py", True, missing)
    t.command("uv pip install sqlalchemy", False)
    fix = t.command("uv run python check.py", True, "TypeError: argument 'auth_token': 'NoneType' object")
    assert fix is not None and fix.moved_on and fix.fix_commands == ("uv pip install sqlalchemy",)
    # A command that shares only the failing command's operands is no fix of the error before.
    t = FixTracker(root="/r")
    t.command("op item get key --fields private | gpg --import", True, "gpg: Total number processed: 0")
    t.command("op item list --vault private", False)
    assert t.command("op item get key --fields private | gpg --import", True, "gpg: no valid OpenPGP data") is None
