"""Per-turn capture: error -> fix as one pitfall, turns as episodes, read incrementally.

The transcript is read as the Stop hook reads it (engram.hooks.turn_capture) and the capture is stored
through the operation the daemon serves (Api.call("session_capture")); the real-client path is
tests/e2e/test_claude_code.py::test_a_fixed_error_comes_back_with_its_fix.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace

import pytest

from benchmarks.fix_recall import measure
from engram.api import Api
from engram.continuity.fixes import FixTracker, error_signature, same_command
from engram.core.types import Ctx, Scope
from engram.hooks.turn_capture import capture_turns
from engram.workflows.lifecycle import prompt_memories
from tests.support import fix_transcripts
from tests.support.fix_transcripts import HERE as FIXES
from tests.support.fix_transcripts import captured_fix, cases

PROJECT = "example.com/capture"


class InProcess:
    """What capture_turns talks to: the daemon's operations, called in this process."""

    def __init__(self, api: Api, session: str):
        self.api, self.ctx = api, Ctx(session_id=session, client="claude-code", project=PROJECT)

    def call(self, name: str, **args):
        return self.api.call(name, args, self.ctx)

    @contextmanager
    def __call__(self):
        yield self


def test_an_error_fixed_by_edits_is_one_fix_and_one_never_fixed_is_none():
    t = FixTracker(root="/r")
    out = "Traceback (most recent call last):\n  File \"/r/app/cfg.py\", line 12, in load\nKeyError: 'timeout'"
    assert t.command("python -m pytest tests/test_cfg.py -x", True, out) is None
    assert t.command("pytest tests/test_cfg.py", False) is None  # passed with no edit: no fix
    t = FixTracker(root="/r")
    t.command("python -m pytest tests/test_cfg.py -x", True, out)
    t.command("ls", False)  # another command passing fixes nothing
    t.edit("app/cfg.py", '    return d["timeout"]\n', '    return d.get("timeout", 30)\n')
    fix = t.command("python -m pytest tests/test_cfg.py", False)
    assert fix is not None and fix.signature == "KeyError: 'timeout'" and fix.location == "app/cfg.py:12"
    assert '- return d["timeout"]' in fix.content() and '+ return d.get("timeout", 30)' in fix.content()
    # Passing again without an edit in between is not a fix; an error never passing stays open.
    t2 = FixTracker()
    t2.command("cargo build", True, "error[E0308]: mismatched types")
    assert t2.command("cargo build", False) is None
    t3 = FixTracker()
    t3.command("go vet ./...", True, 'api/h.go:6:2: "strings" imported and not used')
    t3.edit("api/h.go", "a\n", "b\n")
    assert t3.command("npm test", False) is None and len(t3.state()) == 1


def test_signatures_and_equivalent_commands():
    # The compiler's rule with its place, the file a recurrence names too.
    assert error_signature("src/a.ts(3,5): error TS2322: Type 'x' is not assignable")[0].startswith(
        "src/a.ts(3,5): error TS2322"
    )
    assert error_signature("scripts/x.sh: line 4: FOO: unbound variable\nexit code: 1")[0].endswith("unbound variable")
    assert same_command("pytest tests/a.py::test_x -x", "python -m pytest tests/a.py")
    assert not same_command("pytest tests/a.py", "pytest tests/b.py")
    assert not same_command("npm test", "cargo test")


def test_the_same_fix_twice_is_one_reinforced_pitfall(eng):
    api = Api(eng)
    case = next(c for c in cases() if c["id"] == "rust-unresolved-import")
    fix = captured_fix("claude-code", case).to_dict()
    ctx = Ctx(session_id="s1", project=PROJECT)
    first = api.call("session_capture", {"fixes": [fix]}, ctx)
    again = api.call("session_capture", {"fixes": [fix]}, Ctx(session_id="s2", project=PROJECT))
    assert (first["fixes"], again["fixes"], again["reinforced"]) == (1, 0, 1)
    page = eng.list_memories(memory_type="failure", tags=[f"fix:{fix['key']}"], in_project=PROJECT)
    assert len(page["memories"]) == 1
    m = eng.get(page["memories"][0]["id"])
    assert "serde_json" in m.content and m.project == PROJECT and "pitfall" in m.tags
    # A bad item costs that item only: named in "skipped", the rest of the capture stored.
    turn = {"request": "why does the build fail?", "answer": "serde_json was not imported."}
    out = api.call(
        "session_capture", {"fixes": [{"program": "x"}, fix], "episodes": [{"request": "no answer"}, turn]}, ctx
    )
    assert (out["reinforced"], out["episodes"]) == (1, 1)
    assert out["skipped"] == [
        "fix 0: a fix must be an object with program, signature, location, command, passed, edits, key",
        "episode 0: an episode must be an object with request and answer strings",
    ]


def test_a_turn_the_store_refuses_costs_only_itself(eng):
    """The turns of a capture are stored as one batch: one the store refuses (here a NUL in its
    text) is named in "skipped", and the turns around it are stored."""
    api = Api(eng)
    turns = [
        {"request": "how do we run the tests?", "answer": "With pytest -n 2 from the repository root."},
        {"request": "and the linter?", "answer": "ruff check .\x00"},
        {"request": "which Python?", "answer": "3.11, from the project's venv."},
    ]
    out = api.call("session_capture", {"episodes": turns}, Ctx(session_id="s9", project=PROJECT))
    assert out["episodes"] == 2
    assert out["skipped"] == ["episode 1: content contains a NUL character"]
    kept = sorted(m.content for m, _ in eng.store_db.iter_index_rows() if m.conversation == "s9")
    assert kept == [
        "User: how do we run the tests?\nAssistant: With pytest -n 2 from the repository root.",
        "User: which Python?\nAssistant: 3.11, from the project's venv.",
    ]


def test_turns_are_captured_incrementally_as_episodes_kept_out_of_injection(eng, tmp_path):
    api = Api(eng)
    src = (FIXES / "claude-code" / "py-keyerror.jsonl").read_text().splitlines(keepends=True)
    transcript = tmp_path / "t.jsonl"
    home = eng.settings.home
    payload = {"transcript_path": str(transcript), "session_id": "abc", "cwd": "/repo"}
    rpc = InProcess(api, "claude-code:abc")
    # The first turn's request and the failing command's call, its result not written yet.
    transcript.write_text("".join(src[:2]) + src[2][:40])
    assert "captured 1 events: 0 fixes" in capture_turns(eng.settings, "claude-code", payload, rpc, "/repo")
    with transcript.open("w") as f:  # the rest arrives
        f.write("".join(src))
    msg = capture_turns(eng.settings, "claude-code", payload, rpc, "/repo")
    assert "1 fixes (1 new), 1 turns (1 stored)" in msg, msg
    assert "captured 0 events" in capture_turns(eng.settings, "claude-code", payload, rpc, "/repo")
    state = json.loads(next((home / "hooks" / "capture").glob("*.json")).read_text())
    assert state["offset"] == transcript.stat().st_size and state["open"] == []
    episodes = eng.list_memories(memory_type="episode", in_project=PROJECT)["memories"]
    assert len(episodes) == 1
    ep = eng.get(episodes[0]["id"])
    assert ep.conversation == "claude-code:abc" and ep.content.startswith("User: `python -m pytest")
    assert "Assistant: Fixed:" in ep.content
    # The per-prompt injection and get_context carry the pitfall, never the episode; the
    # checkpoint's failure of the same command is said by the pitfall alone.
    failed = eng.track_failure(
        "`python -m pytest tests/test_config.py -x` failed: KeyError: 'timeout' in test_defaults",
        "pytest",
        project=PROJECT,
    ).memory.id
    shown = prompt_memories(eng, None, "KeyError: 'timeout' in test_defaults", 300, 3, PROJECT)
    assert shown["memory_ids"] and ep.id not in shown["memory_ids"] and failed not in shown["memory_ids"]
    assert "pitfall" in eng.get(shown["memory_ids"][0]).tags
    ctx = eng.context("KeyError timeout test_defaults", scope=Scope.of(PROJECT))
    assert ep.id not in ctx["memory_ids"]
    # What is captured is the hook's decision (its own environment's settings, see the test
    # below and tests/hooks/test_hook_capture_off.py): the daemon's settings, those of whichever
    # process started it, do not turn capture off for every client.
    eng.settings.__dict__["capture_episodes"] = False
    eng.settings.__dict__["capture_off_projects"] = ("example.com/private",)
    sent = api.call(
        "session_capture",
        {"episodes": [{"request": "a", "answer": "b"}]},
        Ctx(session_id="x", project="example.com/private"),
    )
    assert sent["episodes"] == 1


def test_an_answer_that_is_none_makes_no_episode(eng):
    out = Api(eng).call(
        "session_capture",
        {
            "episodes": [
                {"request": "/compact", "answer": "No response requested."},
                {"request": "deploy it", "answer": 'API Error: 401 {"type":"error"}'},
                {"request": "Why is the cache cold?", "answer": "The warm-up job never ran."},
            ]
        },
        Ctx(session_id="s1", project=PROJECT),
    )
    assert out["episodes"] == 1
    (ep,) = eng.list_memories(memory_type="episode", in_project=PROJECT)["memories"]
    assert "warm-up job" in eng.get(ep["id"]).content


def test_what_a_turn_sends_follows_the_settings_where_the_hook_runs(eng, tmp_path):
    # The daemon (here: eng) captures both; the hook's environment turns one off, and the hook
    # does not send it (a daemon started from another environment would not know).
    api = Api(eng)
    src = (FIXES / "claude-code" / "py-keyerror.jsonl").read_text()
    for name, settings, said in (
        ("no-episodes", replace(eng.settings, capture_episodes=False), "1 fixes (1 new), 0 turns (0 stored)"),
        ("no-fixes", replace(eng.settings, capture_fixes=False), "0 fixes (0 new), 1 turns (1 stored)"),
    ):
        transcript = tmp_path / f"{name}.jsonl"
        transcript.write_text(src)
        payload = {"transcript_path": str(transcript), "session_id": name, "cwd": "/repo"}
        msg = capture_turns(settings, "claude-code", payload, InProcess(api, f"claude-code:{name}"), "/repo")
        assert said in msg, msg
    episodes = eng.list_memories(memory_type="episode", in_project=PROJECT)["memories"]
    assert [eng.get(e["id"]).conversation for e in episodes] == ["claude-code:no-fixes"]
    assert len(eng.list_memories(memory_type="failure", in_project=PROJECT)["memories"]) == 1


def test_maintenance_keeps_each_projects_episodes_within_budget(eng):
    from engram.admin.maintenance import run_maintenance

    eng.settings.__dict__["capture_episode_budget"] = 10
    api = Api(eng)
    turns = [{"request": f"question {i} about the parser", "answer": f"answer {i}"} for i in range(14)]
    api.call("session_capture", {"episodes": turns}, Ctx(session_id="s", project=PROJECT))
    api.call("session_capture", {"episodes": turns[:3]}, Ctx(session_id="t", project="example.com/other"))
    report = run_maintenance(eng)
    assert report["pruned_by_reason"]["episodes_over_budget"] == 4
    left = eng.list_memories(memory_type="episode", in_project=PROJECT, limit=100)["memories"]
    assert len(left) == 10
    assert len(eng.list_memories(memory_type="episode", in_project="example.com/other")["memories"]) == 3


def test_the_fixture_transcripts_are_those_the_script_renders():
    assert fix_transcripts.main(["--check"]) == 0


@pytest.mark.model
@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_a_fix_is_in_the_top_3_when_its_error_comes_back(client, settings, real_embedder, clock, tmp_path):
    from engram import Engram

    assert len(cases()) >= 30
    with Engram(tmp_path / "m.duckdb", settings=settings, embedder=real_embedder, clock=clock) as eng:
        r = measure(eng, client)
    assert r["captured"] == r["cases"]
    for split in ("tune", "report"):
        assert r["splits"][split]["top3_rate"] >= 0.9, r
        assert r["splits"][split]["injected_rate"] >= 0.9, r


def _a_captured_session(api: Api) -> None:
    turns = [
        {"request": "How is the ledger's CSV parsed?", "answer": "With csv.DictReader in ledger/io.py."},
        {
            "request": "Why does the import fail on semicolons?",
            "answer": "The dialect is sniffed from one line only; pass delimiter=';' for bank exports.",
        },
        {"request": "Add a test for it", "answer": "Added tests/test_io.py::test_semicolon."},
    ]
    api.call("session_capture", {"episodes": turns}, Ctx(session_id="claude-code:s1", project=PROJECT))


def test_compact_listing_then_full_text_and_what_happened_around_from_the_cli(eng, capsys):
    from engram.cli import main

    api = Api(eng)
    _a_captured_session(api)

    def cli(*argv: str) -> str:
        assert main([*argv], api_factory=lambda settings: api) == 0
        return capsys.readouterr().out

    import os

    os.environ["ENGRAM_PROJECT"] = PROJECT
    try:
        listing = cli("recall", "semicolons delimiter bank exports", "--compact", "--type", "episode")
        first = listing.splitlines()[0].split()
        assert first[2] == "[episode]" and "tokens" in listing and "Why does the import fail" in listing
        mid = first[1]
        shown = cli("show", mid, "--around", "1")
        assert "delimiter=';' for bank exports" in shown  # the full text
        assert "-1 " in shown and "+1 " in shown and "How is the ledger" in shown and "Add a test" in shown
        assert "automatically, without a model: pitfall 0, episode 3" in cli("stats")
    finally:
        del os.environ["ENGRAM_PROJECT"]


def test_compact_listing_and_around_over_http(eng, settings, serve):
    import httpx

    from engram.server.http import build_app

    api = Api(eng)
    _a_captured_session(api)
    base = serve(build_app(api, token=None, settings=settings))
    with httpx.Client(base_url=base, timeout=30) as c:
        r = c.post(
            "/search",
            params={"project": PROJECT},
            json={"query": "semicolons bank exports", "compact": True, "memory_type": "episode"},
        )
        assert r.status_code == 200, r.text
        rows = r.json()["memories"]
        assert rows and set(rows[0]) >= {"id", "memory_type", "line", "when", "tokens"} and "content" not in rows[0]
        got = c.get(f"/memories/{rows[0]['id']}", params={"around": 2, "project": PROJECT}).json()
        assert "delimiter=';'" in got["content"] and len(got["around"]) == 3
        assert [a["position"] for a in got["around"]] == [-1, 0, 1]
        stats = c.get("/stats").json()
        assert stats["captured"]["episode"] == 3


def test_captured_text_goes_through_redaction(eng):
    """A key in a failing command's output, an edit or a turn is never stored as it was."""
    key = "ghp_" + "a1B2c3D4e5" * 4
    t = FixTracker()
    t.command("bash deploy.sh " + key, True, f"curl: (22) The requested URL returned error: 401 for token {key}")
    t.edit("deploy.sh", f"TOKEN={key}\n", "TOKEN=${GITHUB_TOKEN}\n")
    fix = t.command("bash deploy.sh " + key, False)
    assert fix is not None and key in fix.content()  # the hook's side holds it only in memory
    api = Api(eng)
    api.call(
        "session_capture",
        {"fixes": [fix.to_dict()], "episodes": [{"request": f"use {key} to deploy", "answer": "Done."}]},
        Ctx(session_id="s", project=PROJECT),
    )
    stored = [eng.get(m["id"]) for m in eng.list_memories(in_project=PROJECT, limit=50)["memories"]]
    assert {m.memory_type for m in stored} == {"failure", "episode"}
    for m in stored:
        assert key not in m.content and key not in json.dumps(m.metadata), m.memory_type


def test_an_error_waiting_for_its_fix_is_kept_on_disk_redacted(eng, tmp_path):
    key = "sk-ant-" + "x1Y2z3" * 5
    case = {"id": "secret", "cmd": "./deploy.sh", "out": f"error: token {key} was refused", "edits": []}
    lines = fix_transcripts.claude(case)[:3]  # the request and the failing command; no fix yet
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    payload = {"transcript_path": str(transcript), "session_id": "sec", "cwd": "/repo"}
    capture_turns(eng.settings, "claude-code", payload, InProcess(Api(eng), "claude-code:sec"), "/repo")
    state = next((eng.settings.home / "hooks" / "capture").glob("*.json")).read_text()
    assert "was refused" in state and key not in state


@pytest.mark.model
def test_unrelated_prompts_get_nothing_captured_injected(settings, real_embedder, clock, tmp_path):
    from benchmarks.fix_recall import noise
    from engram import Engram

    with Engram(tmp_path / "m.duckdb", settings=settings, embedder=real_embedder, clock=clock) as eng:
        r = noise(eng, "claude-code")
    assert r["prompts"] >= 50 and r["nothing_injected_rate"] >= 0.95, r


def test_a_failure_without_cause_or_fix_is_not_injected_into_a_prompt(eng):
    """A checkpoint's failed command (no root cause, no fix) says only that something failed once:
    on real sessions such records were most of what prompts got and almost never bore on them. It
    stays findable by recall; a failure with its root cause or fix is injected."""
    bare = eng.track_failure(
        "`cat docs/architecture/overview.md` failed: No such file or directory", "cat", project=PROJECT
    ).memory.id
    explained = eng.track_failure(
        "`cat docs/architecture/overview.md` failed: No such file or directory",
        "docs",
        root_cause="the architecture overview moved to docs/design/overview.md",
        project=PROJECT,
    ).memory.id
    prompt = "cat docs/architecture/overview.md: No such file or directory"
    shown = prompt_memories(eng, None, prompt, 300, 5, PROJECT)["memory_ids"]
    assert explained in shown and bare not in shown
    assert bare in [h.memory.id for h in eng.recall(prompt, scope=Scope.of(PROJECT), reinforce=False)]


def test_one_word_of_a_short_prompt_does_not_bring_a_pitfall(eng):
    """A prompt hook pushes a memory into a context nobody asked about, so a hit strong only
    because it holds the one word of a short prompt is not enough (on a real session "remove
    it" brought a pitfall whose command named /tmp/agentv-remove-legacy.md). Two of the
    prompt's words, or a hit close in meaning, are; an agent's own recall still finds it."""
    pitfall = eng.track_failure(
        "`scripts/dispatch.sh --prompt-file /tmp/agentv-remove-legacy.md` failed: no such file or directory",
        "dispatch",
        fix="run the installed helper ~/.agents/skills/workmux/scripts/dispatch.sh",
        project=PROJECT,
    ).memory.id
    hits = eng.recall("remove it", scope=Scope.of(PROJECT), reinforce=False, strong_only=True, explain=True)
    assert [h.memory.id for h in hits] == [pitfall] and hits[0].parts["words"] == 1
    assert prompt_memories(eng, None, "remove it", 300, 5, PROJECT)["memory_ids"] == []
    named = prompt_memories(eng, None, "dispatch the legacy prompt file", 300, 5, PROJECT)
    assert named["memory_ids"] == [pitfall]
