"""`engram hook SessionEnd` as the clients run it: the conventions a transcript's prompts state are
captured once, redacted, for the project only; ENGRAM_CAPTURE_CONVENTIONS=0 captures none."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.hooks.test_hook_command import context_of, engram, hook, payload

PROMPTS = [
    "Thanks! Add httpx to the project. Btw, in this repo we install packages with uv, never pip.",
    "Please run the tests.",
    "Remember that CI logs in with the key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA, never a personal one.",
]


def transcript(tmp_path, repo, prompts=PROMPTS):
    """A Claude Code transcript of a session in which the user said `prompts`."""
    p = tmp_path / "conventions.jsonl"
    lines = [
        {
            "type": "user",
            "cwd": str(repo),
            "sessionId": "c1",
            "uuid": f"u{i}",
            "message": {"role": "user", "content": text},
        }
        for i, text in enumerate(prompts)
    ]
    p.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return p


def git_init(path):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "-C", str(path), "init", "-q"], check=True)
    return path


@pytest.mark.model
def test_a_session_end_captures_the_conventions_once_and_for_its_project(model_home, tmp_path):
    repo, other = git_init(tmp_path / "shop"), git_init(tmp_path / "blog")
    t = transcript(tmp_path, repo)
    end = payload("SessionEnd", repo, session="c1", transcript_path=str(t), reason="prompt_input_exit")

    out, line = hook(model_home, "SessionEnd", end, env={"ENGRAM_CAPTURE_CONVENTIONS": "0"})
    assert out is None and " ok " in line and "conventions" not in line
    ask = payload("UserPromptSubmit", repo, session="c2", prompt="How do I add a dependency here?")
    assert hook(model_home, "UserPromptSubmit", ask)[0] is None  # nothing was captured

    out, line = hook(model_home, "SessionEnd", end)
    assert "conventions: 2 stored, 0 already" in line, line
    out, line = hook(model_home, "SessionEnd", end)  # SessionEnd after PreCompact: nothing twice
    assert "conventions: 0 stored, 2 already" in line, line

    text = context_of(hook(model_home, "UserPromptSubmit", ask)[0], "UserPromptSubmit")
    assert "[convention] In this repo we install packages with uv, never pip." in text
    elsewhere = payload("UserPromptSubmit", other, session="c3", prompt="How do I add a dependency here?")
    assert hook(model_home, "UserPromptSubmit", elsewhere)[0] is None

    found = json.loads(engram(model_home, "--json", "recall", "CI logs in with the key", cwd=repo).stdout)
    stored = json.dumps(found)
    assert "CI logs in with the key" in stored and "[REDACTED]" in stored
    assert "sk-ant-api03-AAAA" not in stored


@pytest.mark.model
def test_a_gemini_prompt_carrying_the_session_start_context_is_searched_without_it(model_home, tmp_path):
    # `gemini -p` puts the SessionStart context before the user's words in BeforeAgent's prompt:
    # searched as it is, the conventions listed there would come back with any request.
    repo = git_init(tmp_path / "shop")
    end = payload("SessionEnd", repo, session="g1", transcript_path=str(transcript(tmp_path, repo)), reason="exit")
    assert "conventions: " in hook(model_home, "SessionEnd", end)[1]  # stored now or by an earlier test
    start = (
        "<hook_context>&lt;engram&gt;\nConventions of this project (said by the user):\n"
        "- In this repo we install packages with uv, never pip.\n&lt;/engram&gt;</hook_context>\n\n"
    )
    unrelated = payload("BeforeAgent", repo, session="g2", prompt=start + "Fix the typo in the footer of the page.")
    out, line = hook(model_home, "BeforeAgent", unrelated, client="gemini")
    assert out is None and "no memory clearly relevant" in line, line
    asked = payload("BeforeAgent", repo, session="g3", prompt=start + "How do I add a dependency here?")
    assert "[convention] In this repo we install packages" in context_of(
        hook(model_home, "BeforeAgent", asked, client="gemini")[0], "BeforeAgent"
    )
    only = payload("BeforeAgent", repo, session="g4", prompt=start)
    assert "no prompt in the input" in hook(model_home, "BeforeAgent", only, client="gemini")[1]


@pytest.mark.model
@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_a_pick_among_the_agents_options_is_stored_as_the_decision(model_home, tmp_path, client):
    # "B" alone says nothing; with the agent's message before it, it decides where the cache lives.
    from tests.hooks.test_option_pick_reading import WRITERS

    repo = git_init(tmp_path / "shop")
    end = payload("SessionEnd", repo, session=f"{client}-p", transcript_path=str(WRITERS[client](tmp_path)))
    out, line = hook(model_home, "SessionEnd", end, client=client)
    # The checkpoint stores it, or finds it stored by the turn's capture it handed off just before.
    assert out is None and re.search(r"conventions: (?:1 stored, 0|0 stored, 1) already", line), line
    found = json.dumps(json.loads(engram(model_home, "--json", "recall", "where the cache lives", cwd=repo).stdout))
    decision = "Decided (Where should the cache live?): Process memory — No server; lost on restart."
    assert found.count(json.dumps(decision)) == 1  # stored once, whichever stored it
