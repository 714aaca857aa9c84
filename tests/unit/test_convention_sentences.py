"""Which sentences of a user's prompt state a convention (engram.text.convention_sentences), on the labelled set."""

from __future__ import annotations

import pytest

from benchmarks.conventions_eval import load_set, score
from engram.text.convention_sentences import conventions_in


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
