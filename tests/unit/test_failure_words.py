"""The words a failure is about (engram.continuity.failure_words): what a prompt must share with a
failure for the prompt hook to push it unasked."""

from engram.continuity.failure_words import failure_words, shared_words
from engram.core.types import Memory


def _failure(content: str, **capture: str) -> Memory:
    return Memory(
        id="m1",
        content=content,
        memory_type="failure",
        importance=0.5,
        recall_count=0,
        created_at="2026-12-07T00:00:00+00:00",
        last_recalled_at=None,
        user_id="default",
        metadata={"capture": capture} if capture else {},
    )


GIT_MV = _failure(
    "Pitfall (git): fatal: not under version control, from `git mv cloud_function_summary.txt docs/`.\n"
    "Fixed by running `git add cloud_function_summary.txt`.",
    program="git",
    signature="fatal: not under version control, source=cloud_function_summary.txt",
    command="git mv cloud_function_summary.txt docs/cloud_function_summary.txt",
)


def test_a_path_is_one_word_its_file_name():
    words = failure_words(GIT_MV)
    assert "cloud_function_summary.txt" in words
    assert not {"cloud", "function", "summari"} & words
    assert shared_words("deploy cloud functions", GIT_MV) == set()
    assert {"cloud_function_summary.txt", "git"} <= shared_words(
        "why is cloud_function_summary.txt untracked in git?", GIT_MV
    )


def test_engram_s_wording_and_the_fix_are_not_what_a_failure_is_about():
    assert shared_words("I fixed it, now run it", GIT_MV) == set()
    assert not {"fix", "ad", "add", "pitfal"} & failure_words(GIT_MV)


def test_numbers_are_no_subject_and_a_failure_without_metadata_is_its_text():
    bare = _failure("`make docs` failed: exit code 2, mkdocs: command not found")
    assert len(shared_words("mkdocs is missing from make docs", bare)) >= 2  # mkdocs, make, docs
    assert not any(w.isdigit() for w in failure_words(bare))
