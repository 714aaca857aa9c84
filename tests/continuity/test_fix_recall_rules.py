"""More error -> fix pairs credited on real sessions (issue 45, branch s45-recall): the same run
under another name, a narrower run that still holds the failing test, a whole suite passing after
the edits, a command the error's own output tells to run. Synthetic outputs in the tools' shapes,
each with the cases the rule must not take."""

from __future__ import annotations

import pytest

from engram.continuity.fixes import FixTracker
from engram.continuity.shell_commands import same_command, targets

MODULE_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    '  File "/r/turso/server.py", line 20, in <module>\n'
    "    from turso.agent import TursoAgent\n"
    "ModuleNotFoundError: No module named 'turso'"
)


def test_a_python_file_run_as_a_module_or_as_a_script_is_one_command():
    assert same_command("cd /r/turso && python -m server", "cd /r/turso && python server.py")
    assert same_command("python -m pkg.cli --help", "uv run python pkg/cli.py")
    assert not same_command("python a.py", "python b.py")
    assert not same_command("python -m pytest -q", "python tools/pytest_report.py")


def test_an_import_fixed_in_a_module_run_as_a_script_next_is_got_past():
    # `python -m server` fails on a package import; the import is made local and the agent runs
    # the file as a script, which fails further on: the first error is past, fixed by that edit.
    t = FixTracker(root="/r")
    assert t.command("cd /r/turso && python -m server", True, MODULE_ERROR) is None
    t.edit("turso/server.py", "from turso.agent import TursoAgent\n", "from agent import TursoAgent\n")
    fix = t.command(
        "cd /r/turso && python server.py", True, "ModuleNotFoundError: No module named 'libsql_experimental'"
    )
    assert fix is not None and fix.moved_on and "No module named 'turso'" in fix.signature
    assert [f for f, _ in fix.edits] == ["turso/server.py"]


def test_a_test_filter_of_names_joined_by_bars_gives_each_name():
    assert {"TestA", "TestB"} <= targets('go test -race -run "TestA|TestB" ./cmd/x/')
    assert same_command('go test -run "TestA|TestB" ./cmd/x/', 'go test -run "TestB" ./cmd/x/')
    assert not same_command('go test -run "TestA|TestB" ./cmd/x/', 'go test -run "TestC" ./cmd/x/')
    assert targets("grep -E 'a|b' notes.txt") >= {"a", "b"}  # any program: the operands are the names
    assert "a|b.c" in targets("tool 'a|b.c'")  # not names alone: one operand


def test_a_narrower_run_that_holds_the_failing_test_passes_it():
    out = (
        '=== RUN   TestFilters\n    state_test.go:333: got "other", want "current"\n'
        "--- FAIL: TestFilters (0.05s)\nFAIL\tgithub.com/x/cli/strategy\t0.9s"
    )
    t = FixTracker(root="/r")
    t.command('go test -run "TestCleans|TestFilters" ./strategy/', True, out)
    t.edit("strategy/state_test.go", "dir := t.TempDir()\n", "dir := resolved(t.TempDir())\n")
    fix = t.command('go test -run "TestFilters" ./strategy/', False)
    assert fix is not None and fix.signature == "--- FAIL: TestFilters"


REJECTED_PUSH = (
    "To github.com:acme/cli.git\n"
    " ! [rejected]          feature -> feature (fetch first)\n"
    "error: failed to push some refs to 'github.com:acme/cli.git'\n"
    "hint: Updates were rejected because the remote contains work that you do not\n"
    "hint: have locally. If you want to integrate the remote changes, use\n"
    "hint: 'git pull' before pushing again.\n"
    "hint: See the 'Note about fast-forwards' in 'git push --help' for details."
)


def test_what_an_errors_output_tells_to_run():
    from engram.continuity.error_lines import suggested_commands

    assert suggested_commands(REJECTED_PUSH, "git") == [["git", "pull"]]  # not the help it points to
    assert suggested_commands("You are not logged in. To log in, run: gh auth login", "gh") == [["gh", "auth", "login"]]
    assert suggested_commands("error: try 'npm install' first", "git") == []  # another program's
    assert suggested_commands("fatal: 'origin' does not appear to be a git repository", "git") == []


def test_a_command_the_error_told_to_run_is_the_fix():
    # A commit and push rejected (fetch first); the agent pulls, as git's hint says, and pushes.
    t = FixTracker(root="/r")
    t.command("git add src/a.go && git commit -m 'Inline the helper' && git push 2>&1", True, REJECTED_PUSH)
    t.command("git pull --rebase 2>&1", False)
    fix = t.command("git push 2>&1", False)
    assert fix is not None and fix.fix_commands == ("git pull --rebase 2>&1",)
    assert "[rejected]" in fix.signature


def test_a_command_the_error_did_not_tell_is_no_fix():
    t = FixTracker(root="/r")
    t.command("git push 2>&1", True, REJECTED_PUSH)
    t.command("git stash 2>&1", False)  # neither told nor sharing a word with the error
    assert t.command("git push 2>&1", False) is None


GO_BUILD_FAILED = (
    "# acme/cli/session [acme/cli/session.test]\n"
    'session/session_test.go:4:2: "context" imported and not used\n'
    "FAIL\tacme/cli/session [build failed]\nFAIL"
)


def test_which_runs_are_a_whole_suite_of_the_kind_that_failed():
    from engram.continuity.shell_commands import suite_covers

    narrow = "cd /r/cli && go test ./session -v -run TestSessionID 2>&1"
    assert suite_covers("cd /r && mise run test 2>&1 | tail -20", narrow)  # the project's task
    assert suite_covers("go test ./...", narrow)
    assert suite_covers("npm run test:ci", "npx vitest run src/a.test.ts")
    assert not suite_covers("mise run lint", narrow)  # another kind
    assert not suite_covers("cargo test", narrow)  # another program, not a task runner
    assert not suite_covers("go test ./api", narrow)  # another part, not the whole
    assert not suite_covers("pytest tests/test_b.py", "pytest tests/test_a.py")
    assert not suite_covers("ssh ci 'make test'", "make test TEST=a")  # another host


def test_the_whole_suite_passing_after_the_edits_fixes_a_part_that_failed():
    t = FixTracker(root="/r")
    t.command("cd /r/cli && go test ./session -v -run TestSessionID 2>&1", True, GO_BUILD_FAILED)
    t.edit("cli/session/session_test.go", 'import "context"\n', "")
    fix = t.command("cd /r && mise run test 2>&1 | tail -20", False)
    assert fix is not None and '"context" imported and not used' in fix.signature
    assert [f for f, _ in fix.edits] == ["cli/session/session_test.go"]


def test_the_whole_suite_passing_without_a_touching_edit_fixes_nothing():
    t = FixTracker(root="/r")
    t.command("cd /r/cli && go test ./session -v -run TestSessionID 2>&1", True, GO_BUILD_FAILED)
    t.edit("docs/CHANGELOG.md", "a\n", "b\n")  # no edit touches the failure: it passed by itself
    assert t.command("mise run test", False) is None
    t.edit("cli/session/session_test.go", 'import "context"\n', "")
    assert t.command("mise run lint", False) is None  # a lint passing says nothing of the tests


MERGE_CONFLICT = (
    "Auto-merging cmd/cli/hooks.go\n"
    "CONFLICT (content): Merge conflict in cmd/cli/hooks.go\n"
    "Auto-merging cmd/cli/strategy.go\n"
    "Automatic merge failed; fix conflicts and then commit the result."
)


def test_a_merge_conflict_is_fixed_by_how_its_files_were_resolved_when_the_merge_is_committed():
    t = FixTracker(root="/r")
    assert t.command("git fetch origin main && git merge origin/main 2>&1", True, MERGE_CONFLICT) is None
    t.command("git checkout --theirs cmd/cli/hooks.go && git add cmd/cli/hooks.go", False)
    t.command("go build ./...", False)
    t.edit("cmd/cli/other.go", "a\n", "b\n")  # not a conflicted file
    fix = t.command("git commit --no-edit", False)
    assert fix is not None and fix.signature == "CONFLICT (content): Merge conflict in cmd/cli/hooks.go"
    assert fix.fix_commands == ("git checkout --theirs cmd/cli/hooks.go && git add cmd/cli/hooks.go",)
    assert fix.edits == ()
    # Resolved by hand: the edits of the conflicted file are the fix; rebase --continue concludes.
    t = FixTracker(root="/r")
    t.command("git pull --rebase", True, MERGE_CONFLICT)
    t.edit("cmd/cli/hooks.go", "<<<<<<< HEAD\nold()\n=======\nnew()\n>>>>>>> main\n", "new()\n")
    fix = t.command("git add cmd/cli/hooks.go && GIT_EDITOR=true git rebase --continue", False)
    assert fix is not None and [f for f, _ in fix.edits] == ["cmd/cli/hooks.go"]


def test_a_merge_given_up_or_concluded_without_touching_its_files_is_no_fix():
    t = FixTracker(root="/r")
    t.command("git pull --rebase && git push", True, MERGE_CONFLICT)
    assert t.command("git rebase --abort", False) is None
    assert t.open == []  # given up: nothing waits for a fix
    t = FixTracker(root="/r")
    t.command("git merge origin/main", True, MERGE_CONFLICT)
    t.edit("README.md", "a\n", "b\n")
    assert t.command("git commit -am wip", False) is None
    assert t.command("git merge origin/main", False) is None  # the merge ended at the commit


def test_which_errors_say_a_program_is_missing():
    from engram.continuity.error_lines import missing_program

    assert missing_program("bash: line 1: gh: command not found") == "gh"
    assert missing_program("zsh: command not found: rg") == "rg"
    assert missing_program("'node' is not recognized as an internal or external command,") == "node"
    assert missing_program('exec: "docker": executable file not found in $PATH') == "docker"
    assert missing_program("bash: line 1: out/packages.txt: No such file or directory") is None  # a file
    assert missing_program("ash: /usr/libexec/sftp-server: not found") is None  # a path on another host


def test_a_missing_program_is_fixed_by_the_install_once_it_runs_again():
    t = FixTracker()
    t.command("gh --version && gh auth status", True, "bash: line 1: gh: command not found\nExit Code: 127")
    t.command("sudo pacman -S --noconfirm github-cli", False)
    # gh runs now (another subcommand, failing on something else): the missing program is past.
    fix = t.command("gh auth status && gh ssh-key list", True, "You are not logged into any GitHub hosts.")
    assert fix is not None and fix.moved_on and fix.program == "gh"
    assert fix.fix_commands == ("sudo pacman -S --noconfirm github-cli",)


def test_a_missing_program_found_without_an_install_or_still_missing_is_no_fix():
    t = FixTracker()
    t.command("gh pr list", True, "bash: gh: command not found")
    assert t.command("gh api user", True, "bash: gh: command not found") is None  # still missing
    t.command("export PATH=$HOME/bin:$PATH", False)  # no install
    assert t.command("gh api user", False) is None
    t = FixTracker()
    t.command("gh pr list", True, "bash: gh: command not found")
    t.command("brew install jq", False)
    assert t.command("jq --version", False) is None  # another program ran, gh still waits
    assert t.open and t.open[0]["missing"] == "gh"


def test_a_script_naming_its_file_once_and_writing_it_later_is_an_edit_of_it():
    from engram.hooks.shell_edits import shell_edits

    script = (
        "python - <<'PY'\nfrom pathlib import Path\npath = Path('/w/ui/index.html')\ntext = path.read_text()\n"
        "needle = '  </head>\\n'\nif needle not in text:\n    raise SystemExit('needle not found')\n"
        "path.write_text(text.replace(needle, '    <script>window.global = window;</script>\\n  </head>\\n', 1))\nPY"
    )
    (edit,) = shell_edits(script).edits
    # The file, and its change as the replacement made (old, new), not the whole script.
    assert edit == ("/w/ui/index.html", "  </head>\n", "    <script>window.global = window;</script>\n  </head>\n")
    reads = "python - <<'PY'\nfrom pathlib import Path\nsrc = Path('a.py')\nprint(src.read_text())\nPY"
    assert shell_edits(reads).edits == []  # named and read, never written
    two = (
        "python - <<'PY'\nfrom pathlib import Path\na = Path('x.ts')\nb = Path('y.ts')\n"
        "a.write_text(a.read_text().replace('p', 'q'))\nb.write_text(b.read_text().replace('r', 's'))\nPY"
    )
    edits = shell_edits(two).edits
    assert [f for f, _, _ in edits] == ["x.ts", "y.ts"]  # which replace is whose is not read: the script
    assert all("replace" in new and "Path(" not in new for _, _, new in edits)  # without its plumbing


def test_edits_made_before_the_user_says_it_is_still_broken_are_not_the_fix():
    t = FixTracker()
    t.request("blank screen: Uncaught ReferenceError: global is not defined")
    t.edit("ui/src/main.tsx", "", "globalThis.global = globalThis;\n")
    assert t.request("same error. killed and restarted the dev server") == []
    t.edit("ui/index.html", "  </head>\n", "    <script>window.global = window;</script>\n  </head>\n")
    (fix,) = t.request("how do I move a node?")
    assert [f for f, _ in fix.edits] == ["ui/index.html"]  # the shim in main.tsx did not fix it


@pytest.mark.parametrize(
    ("prompt", "headline"),
    [
        (
            "Getting this error from API specify-poker-api-1   | auth.denied { reason: 'Missing bearer token' }\n"
            "specify-poker-api-1   | {\nspecify-poker-api-1   |   resource: {",
            "auth.denied { reason: 'Missing bearer token' }",
        ),
        (
            "Wait, hold on. I see a console error: \n\n[React Flow]: It seems that you are trying to drag a node "
            "that is not initialized. Please use onNodesChange as explained in the docs.",
            "[React Flow]: It seems that you are trying to drag a node that is not initialized. Please use "
            "onNodesChange as explained in the docs.",
        ),
        ("got this:\nTypeError: x is undefined", "TypeError: x is undefined"),
    ],
)
def test_a_prompt_that_says_it_holds_an_error_gives_its_headline(prompt, headline):
    from engram.continuity.error_lines import pasted_errors

    assert pasted_errors(prompt)[0][0] == headline


@pytest.mark.parametrize(
    "prompt",
    [
        "same error. killed and restarted `just dev`",  # told again, nothing pasted
        "I still get this error",
        "can you explain what this error means?",
        "this error happens only on Safari when I click the save button twice",  # words, not a paste
        "Fix the error handling in the API so it returns 400",
        "add a new error page for 404s",
    ],
)
def test_an_error_named_without_one_pasted_gives_no_headline(prompt):
    from engram.continuity.error_lines import pasted_errors

    assert pasted_errors(prompt) == []


def test_the_hosts_a_command_reaches_and_the_host_it_runs_on():
    from engram.continuity.shell_commands import host_of, talks_to

    assert talks_to("dig google.com @10.0.0.1 +short +timeout=3 2>&1") == {"10.0.0.1"}
    assert talks_to("curl -s --connect-timeout 2 http://192.168.8.1:4000/api/status") == {"192.168.8.1"}
    assert talks_to("ping -c 2 router.lan") == {"router.lan"}
    assert talks_to("curl http://localhost:8000/health") == set()  # this machine
    assert host_of("ssh -o ConnectTimeout=5 root@10.0.0.1 'uci commit firewall'") == "10.0.0.1"
    assert host_of("uci commit firewall") == ""


def test_dig_style_plus_options_are_options():
    assert same_command("dig a.com @10.0.0.1 +short +timeout=3", "dig a.com @10.0.0.1 +short +timeout=5")
    assert not same_command("dig a.com @10.0.0.1 +short", "dig b.org @10.0.0.1 +short")


def test_looks_at_a_router_are_read_only_even_through_ssh_and_subshells():
    from engram.continuity.shell_commands import read_only

    assert read_only("ssh root@h \"echo '=== C ===' && (systemctl status c 2>/dev/null || pgrep -a c || echo no)\"")
    assert read_only("ssh root@h 'nft list chain inet fw4 input'")
    assert read_only("ssh root@h 'uci show firewall' && nc -u -z -w 3 h 53")
    assert not read_only("ssh root@h \"uci set firewall.x.enabled='0' && uci commit firewall && fw4 reload\"")
    assert not read_only("ssh h 'cat /etc/x' && rm notes.txt")


DIG_TIMEOUT = (
    "; <<>> DiG 9.10.6 <<>> a.com @10.0.0.1 +short +timeout=3\n;; connection timed out; no servers could be reached"
)


def test_a_change_made_on_the_host_a_failing_command_reaches_is_its_fix():
    t = FixTracker()
    t.command("dig a.com @10.0.0.1 +short +timeout=3", True, DIG_TIMEOUT)
    t.command("ssh root@10.0.0.1 'nft list ruleset'", False)  # a look
    t.command("ssh root@10.0.0.1 \"uci set firewall.drop_dns.enabled='0' && uci commit firewall\"", False)
    t.command("ssh root@10.0.0.2 '/etc/init.d/other restart'", False)  # another host
    fix = t.command("dig a.com @10.0.0.1 +short +timeout=5", False)
    assert fix is not None
    assert fix.fix_commands == ("ssh root@10.0.0.1 \"uci set firewall.drop_dns.enabled='0' && uci commit firewall\"",)


def test_a_command_that_prints_nothing_is_headed_by_its_exit_note():
    from engram.continuity.error_lines import error_signature

    assert error_signature("Exit Code: 7")[0] == "failed (Exit Code: 7)"
    assert error_signature("")[0] == "failed"


def test_a_changed_command_piped_into_grep_shows_no_pass():
    t = FixTracker()
    t.command("gitleaks detect --config .gitleaks.toml --no-git", True, "WRN leaks found: 1092")
    # Its exit is grep's: that the lines it picked exist says nothing of gitleaks passing.
    assert t.command("gitleaks detect --config .gitleaks.toml --no-git --log-level error | grep File:", False) is None
    t = FixTracker()
    t.command("pytest -q", True, "ModuleNotFoundError: No module named 'opk'")
    assert t.command("PYTHONPATH=. pytest -q", False) is not None  # unpiped, the changed command passed


def test_powershell_and_gpg_looks_are_read_only():
    from engram.continuity.shell_commands import read_only

    assert read_only("powershell 'Get-Command gpg -ErrorAction SilentlyContinue | Select-Object Source'")
    assert read_only("powershell '(Get-Content r.json | ConvertFrom-Json).Length'")
    assert read_only("gpg --list-secret-keys 8E1F899571345D06")
    assert not read_only("powershell 'Remove-Item r.json'")
    assert not read_only("gpg --import key.asc")


BIOME_FORMAT = (
    "$ biome check --error-on-warnings\n"
    "frontend/src/components/ContextTab.tsx format ━━━━━━━━━━━━━━━━━━━━━━\n\n"
    "  × Formatter would have printed the following content:\n"
    "  × Some errors were emitted while running checks."
)


def test_a_check_run_in_its_fixing_mode_is_the_fix_of_that_check():
    t = FixTracker()
    t.command("bun run lint 2>&1", True, BIOME_FORMAT)
    t.command("bun run lint:fix 2>&1", False)
    fix = t.command("bun run lint 2>&1", False)
    assert fix is not None and fix.signature == "frontend/src/components/ContextTab.tsx format"
    assert fix.fix_commands == ("bun run lint:fix 2>&1",)
    t = FixTracker()
    t.command("ruff check src", True, "src/a.py:1:1: F401 [*] `os` imported but unused")
    # The same check with --fix passing is the changed command that fixed it.
    fix = t.command("ruff check --fix src", False)
    assert fix is not None and "ruff check --fix src" in fix.content() and not fix.fix_commands


def test_another_tasks_fixer_is_not_the_fix():
    t = FixTracker()
    t.command('mise run test:ci 2>&1 | grep -E "FAIL|---"', True, "--- FAIL: TestShadow_CommitBeforeStop (1.15s)")
    t.command("mise run fmt", False)  # formats, but is not the check that failed
    assert t.command("mise run test:ci", False) is None
