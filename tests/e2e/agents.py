"""The three agent clients as the per-client e2e tests drive them, behind one shape: a test written
once and parametrised by client (`@pytest.mark.parametrize("agent", AGENTS, ids=str)`).

Each Agent says how a user sets the client up in a repository with engram's hooks, runs one
unattended session against the client's scripted model, and reads back what the model was sent.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_fakes import FakeAnthropic, FakeGemini, FakeOpenAI, anthropic_text, gemini_text, openai_text
from test_claude_code import claude, install_hooks, result_of
from test_codex_cli import codex, set_up
from test_codex_cli import ok as codex_ok
from test_gemini_cli import gemini, setup_repo
from test_gemini_cli import ok as gemini_ok


def unescaped(sent: str) -> str:
    """A request body's text with the JSON escapes of quotes undone (`\\"` and a doubly escaped `\\\\\\"`)."""
    return sent.replace('\\\\\\"', '"').replace('\\"', '"')


@dataclass(frozen=True)
class Agent:
    name: str  # engram's name of the client: claude-code, codex, gemini
    turn_end: str  # the hook event that captures a turn: Stop or AfterAgent
    model: Callable[[list], AbstractContextManager[Any]]  # the scripted model the client talks to
    set_up: Callable[[Path, Path, Path], None]  # (repo, client_home, engram_home): engram's hooks in place
    user_scope: bool  # the hooks, once set up, run in every repository's sessions (the user's settings)
    session: Callable[[Path, str, Any, Path, Path], None]  # (repo, prompt, model, client_home, engram_home)
    text_of: Callable[[dict], str]  # a request's text as the fake model received it

    def set_up_in(self, repos: list[Path], client_home: Path, engram_home: Path, again: bool = False) -> None:
        """engram's hooks for sessions in each of `repos`, as the user sets them up; `again`: the user
        set them up before, in another repository (a client whose hooks are the user's needs nothing)."""
        for repo in ([] if again else repos[:1]) if self.user_scope else repos:
            self.set_up(repo, client_home, engram_home)

    def seen(self, model: Any, i: int = 0) -> str:
        """What the model was sent in its i-th request of the agent loop, markup and quotes unescaped."""
        return unescaped(html.unescape(self.text_of(model.loop_requests()[i])))

    def __str__(self) -> str:
        return self.name


def _claude_session(repo: Path, prompt: str, model: Any, client_home: Path, engram_home: Path) -> None:
    result_of(claude(repo, prompt, model, client_home, engram_home, mcp=False))


def _codex_session(repo: Path, prompt: str, model: Any, client_home: Path, engram_home: Path) -> None:
    codex_ok(codex(repo, prompt, model, client_home, engram_home))


def _gemini_session(repo: Path, prompt: str, model: Any, client_home: Path, engram_home: Path) -> None:
    gemini_ok(gemini(repo, prompt, model, client_home, engram_home))


AGENTS = (
    Agent(
        "claude-code",
        "Stop",
        FakeAnthropic,
        lambda repo, client_home, engram_home: install_hooks(repo, engram_home),
        False,
        _claude_session,
        anthropic_text,
    ),
    Agent(
        "codex",
        "Stop",
        FakeOpenAI,
        lambda repo, client_home, engram_home: set_up(repo, client_home, engram_home, mcp=False),
        True,  # CODEX_HOME's hooks.json
        _codex_session,
        openai_text,
    ),
    Agent(
        "gemini",
        "AfterAgent",
        FakeGemini,
        lambda repo, client_home, engram_home: setup_repo(repo, engram_home),
        False,
        _gemini_session,
        gemini_text,
    ),
)
