"""Which sentences of a user's prompt state a convention (engram.text.convention_sentences), on the labelled set."""

from __future__ import annotations

import pytest

from benchmarks.conventions_eval import load_set, score
from engram.text.convention_sentences import convention_statements, conventions_in


def test_the_report_half_meets_the_targets():
    rows = load_set()
    report = [r for r in rows if r["half"] == "report"]
    assert len(rows) >= 150 and len(report) >= 75
    # Both languages the issue names, and prompts with and without a convention, on the half scored.
    assert {"en", "zh"} <= {r["lang"] for r in report}
    assert any(r["conventions"] for r in report) and any(not r["conventions"] for r in report)
    s = score(report)
    assert s["precision"] >= 0.9, s["misses"]
    assert s["recall"] >= 0.7, s["misses"]


def test_the_halves_were_split_by_hash():
    import hashlib

    for r in load_set():
        if r["half"] == "fresh":  # written after the rules were frozen, apart from the split
            continue
        even = hashlib.sha256(r["prompt"].encode()).digest()[0] % 2 == 0
        assert r["half"] == ("tune" if even else "report"), r["id"]


def test_a_convention_among_requests_is_kept_alone_and_reads_on_its_own():
    prompt = (
        "Thanks! Can you add httpx to the project? Btw, in this repo we install packages with uv. "
        "Never pip.\nPlease run the tests afterwards."
    )
    assert conventions_in(prompt) == ["In this repo we install packages with uv. Never pip."]


def test_quoted_and_pasted_text_is_not_the_users_convention():
    prompt = (
        'The linter says "Always use snake_case". Here is the log:\n'
        "```\nWARNING: never run as root\n```\n"
        "> We always deploy on Fridays.\n"
        "ValueError: you must always pass a name"
    )
    assert conventions_in(prompt) == []


@pytest.mark.parametrize(
    "prompt",
    [
        "Never mind, it works now.",
        "I'm always getting this error from make.",
        "Don't run the full suite this time.",
        "If we always used uv, would CI be faster?",
        "They never write tests upstream.",
        "Do we always squash-merge?",
        "我们是不是一直用 uv？",
        "这次先不要改测试。",
    ],
)
def test_near_misses_are_not_conventions(prompt):
    assert conventions_in(prompt) == []


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("记住，我们用 uv 安装依赖，不要用 pip。", "我们用 uv 安装依赖，不要用 pip。"),
        ("Désormais, on écrit les commits en anglais.", "Désormais, on écrit les commits en anglais."),
        ("please remember that we deploy from the release branch, thanks", "We deploy from the release branch"),
    ],
)
def test_lead_ins_are_dropped(prompt, expected):
    assert conventions_in(prompt) == [expected]


def test_a_prompt_that_is_not_text_is_refused_by_name():
    with pytest.raises(TypeError, match="prompt must be a string, got int"):
        conventions_in(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- prompts in the shapes real sessions have

SPEC_KIT = (
    "## User Input\n\n```text\n{user}\n```\n\n"
    "You **MUST** consider the user input before proceeding (if not empty).\n\n## Outline\n\n"
    "1. Run `.specify/scripts/bash/check-prerequisites.sh --json` from repo root. All paths must be absolute.\n"
    "2. **Checkbox**: ALWAYS start with `- [ ]` (markdown checkbox). Do NOT output them all at once.\n"
)


def test_a_kits_template_gives_only_what_the_user_typed_into_it():
    user = "T012\nFrom now on, every handler returns snake_case JSON."
    assert conventions_in(SPEC_KIT.format(user=user)) == ["From now on, every handler returns snake_case JSON."]
    assert conventions_in(SPEC_KIT.format(user="T013")) == []
    command_file = (
        "# /butler-exec — Execute a ButlerSpec\n\nPurpose: run one spec; never replan or modify other files.\n"
        "- Do NOT touch other files. Always keep edits confined to the declared target file.\n"
    )
    assert conventions_in(command_file) == []
    assert conventions_in("Plan for $ARGUMENTS: never skip the review step.") == []


def test_a_slash_commands_arguments_are_the_users_words():
    assert conventions_in("/speckit.constitution We always use uv for Python; never pip.") == [
        "We always use uv for Python; never pip."
    ]


def test_a_pasted_document_with_headings_holds_no_convention_of_the_user():
    doc = "# Plan\n\n## Steps\nAll tests must pass.\n\n## Verification\nEvery endpoint should return JSON.\n"
    assert conventions_in(doc) == []


def test_an_error_pasted_after_the_users_words_is_not_theirs():
    prompt = (
        'now this one (index):1 Uncaught TypeError: Failed to resolve module specifier "x". '
        'Relative references must start with either "/", "./", or "../".'
    )
    assert conventions_in(prompt) == []
    trace = (
        "Seems to work but the console says: Warning: Keys should be unique so components keep their identity.\n"
        "    at div\n    at http://localhost:3000/chunk.js:30815:13\n    at App (app.js:1:1)"
    )
    assert conventions_in(trace) == []


@pytest.mark.parametrize(
    "prompt", ["I need it to be like that from now on", "Like that from now on, please.", "Keep doing it this way."]
)
def test_a_rule_that_only_points_back_is_not_kept_without_what_it_points_to(prompt):
    assert conventions_in(prompt) == []


@pytest.mark.parametrize(
    "prompt, standing",
    [
        ("Never commit without signing.", True),
        ("Commit changes as each task is completed and tests pass.", True),
        ("Commit messages must be in the imperative mood.", True),  # about how the work is done
        ("Please remember that we deploy from the release branch.", True),
        ("Each panel should support a specific portion of the printer settings.", False),  # this task's spec
        ("Update the skill to run `nvm use 20` before running tests.", False),  # a request that sets a rule
        ("In the Dockerfiles, run `npm ci` before copying the sources.", False),
        ("OK, store game state in Redis.", False),  # a decision about the stack
        ("Note that the staging host is slow.", False),  # "note that" leads into a fact of the task
        ("Bump the version prior to releasing.", False),  # a request that sets a rule, other words
        ("As you go, add a test for each endpoint you touch.", False),
        ("Let's avoid duplicating the parser.", False),
        ("One migration at a time, please.", False),
        ("I would like you to use Postgres for the job queue.", False),  # a decision about the stack
    ],
)
def test_a_rule_said_as_standing_is_a_convention_and_one_said_once_without_a_cue_a_candidate(prompt, standing):
    (st,) = convention_statements(prompt)
    assert st.standing is standing


@pytest.mark.parametrize(
    "prompt",
    [
        "Verify git-ai v1.3.1 is working in this repo.",
        "Fix the flaky login test in this repo.",
        "Install the hooks in this repo.",
    ],
)
def test_a_task_located_in_the_repository_is_not_a_rule_of_it(prompt):
    assert convention_statements(prompt) == []


def test_a_request_with_a_cue_of_standing_beside_the_location_is_still_a_rule():
    (st,) = convention_statements("Install dependencies with uv in this repo, never pip.")
    assert st.standing


def test_a_rule_without_its_subject_is_stored_with_the_line_it_continues():
    prompt = (
        "brainstorm:\n- automatically generate checkpoint summaries when creating checkpoints\n"
        "- must be controlled by configuration, default to 'off'\n"
    )
    assert conventions_in(prompt) == [
        "Automatically generate checkpoint summaries when creating checkpoints: "
        "must be controlled by configuration, default to 'off'"
    ]
