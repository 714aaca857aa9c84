"""An answer that picks an option the agent offered (engram/text/option_picks.py): the option
shapes agents write, the answers that pick, and the prompts that only look like picks."""

from __future__ import annotations

import pytest

from engram.text.option_picks import offered_options, picked_options, prompt_statements

# The shapes the agents of the real sessions used (issue 45's corpus), written anew.
TABLE = """I've read the code. **First question:** When should the summary be generated?

| Option | Description |
|--------|-------------|
| **A. At commit time (Recommended)** | Generate when the user commits. Summary stored in `metadata.json`. |
| **B. At every checkpoint** | Generate on each save. More expensive. |
| **C. On-demand** | Generate when a checkpoint is viewed. |

Which timing model do you want?"""

SPEC_KIT = """## Question 2 of 5: Admin User Role Model

**Recommended:** Option A (Single admin role) - simpler to manage.

| Option | Description |
|--------|-------------|
| A | Single admin role - All authenticated admins have full permissions |
| B | Two roles - Editor and Admin |
| Short | Provide a different short answer (<=5 words) |

You can reply with the option letter (e.g., "A")."""

HEADINGS = """Here's a summary of the packages.

## Where should `GetOrCreateSessionID()` live?

**Option 1: `session/` package** ✅ **BEST FIT**
- It manages session identity
- `StateStore` already manages the state files

**Option 2: `strategy/` package** (current)
- Works but conceptually wrong

**Option 3: `paths/` package**
- Wrong - `paths` is for path construction

**Recommendation:** Move to `session/` package."""

MARKDOWN_HEADINGS = """### Option 1 — Keep the cache in Redis
Shared between workers; needs a Redis server.

### Option 2 — Keep the cache in process memory
No server; lost on restart."""

NEXT_STEPS = """The repository is cycled with a signed commit.

**Would you like to:**
1. **Push to GitHub** (`git push origin main`)
2. **Clean up temp files** (9 files)
3. **Review the commit** before pushing"""

NAMED = """To get started, which platform would you like to prioritize for submitting your expenses?

- **WhatsApp** (requires a Business API or a gateway like Twilio)
- **Telegram** (easier to set up with a free bot API)"""

NO_OPTIONS = """I fixed the import cycle and the tests pass. Want me to push the branch?"""


def test_a_table_of_lettered_options_and_the_question_above_it():
    options = offered_options(TABLE)
    assert [o.key for o in options] == ["A", "B", "C"]
    assert options[0].question == "When should the summary be generated?" and options[0].asks
    [decision] = picked_options("A.", TABLE)
    assert decision.standing
    assert decision.text == (
        "Decided (When should the summary be generated?): At commit time — Generate when the user commits. "
        "Summary stored in `metadata.json`."
    )


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [
        ("A", ["Single admin role"]),
        ("a", ["Single admin role"]),
        ("B.", ["Two roles"]),
        ("(b)", ["Two roles"]),
        ("option b", ["Two roles"]),
        ("yes, let's go with A", ["Single admin role"]),
        ("go with the second one", ["Two roles"]),
        ("A and B", ["Single admin role", "Two roles"]),
        ("b please", ["Two roles"]),
        ("A is fine", ["Single admin role"]),
    ],
)
def test_the_answers_that_pick(answer, chosen):
    decisions = picked_options(answer, SPEC_KIT)
    assert len(decisions) == len(chosen)
    for d, c in zip(decisions, chosen, strict=True):
        assert d.text.startswith(f"Decided (Admin User Role Model): {c}") and d.standing


def test_option_lines_with_their_points_and_markdown_headings():
    [d] = picked_options("yes do option 1", HEADINGS)
    assert d.text == (
        "Decided (Where should `GetOrCreateSessionID()` live?): `session/` package — It manages session "
        "identity; `StateStore` already manages the state files"
    )
    [two] = picked_options("2", MARKDOWN_HEADINGS)
    assert two.text == "Decided: Keep the cache in process memory — No server; lost on restart."
    assert not two.standing  # no question seen: held until confirmed
    both = picked_options("1 and 2", MARKDOWN_HEADINGS)
    assert [d.text.split(" — ")[0] for d in both] == ["Decided: Keep the cache in Redis", two.text.split(" — ")[0]]


def test_what_the_answer_adds_after_its_pick_is_kept():
    [d] = picked_options("A. is fine, ensure we log", TABLE)
    assert d.text.endswith("Summary stored in `metadata.json`. Ensure we log.")
    [same] = picked_options("A, sounds good", TABLE)
    assert same.text.endswith("`metadata.json`.")


def test_a_menu_of_next_steps_is_a_candidate():
    [d] = picked_options("1", NEXT_STEPS)
    assert d.text == "Decided (Would you like to): Push to GitHub (`git push origin main`)"
    assert not d.standing


def test_an_option_picked_by_its_name():
    [d] = picked_options("Telegram.", NAMED)
    assert d.text.startswith("Decided (To get started, which platform would you like to prioritize")
    assert "Telegram (easier to set up with a free bot API)" in d.text and d.standing
    assert picked_options("2", NAMED) == []  # an unnumbered list has no number 2
    assert picked_options("Signal.", NAMED) == []


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("A lot of tests fail", SPEC_KIT),
        ("A is broken again", SPEC_KIT),
        ("B-tree indexes are slow here", SPEC_KIT),
        ("1. fix the login bug\n2. add tests for it", NEXT_STEPS),
        ("A.", NO_OPTIONS),  # no options: never "A." alone
        ("yes", NO_OPTIONS),
        ("C", SPEC_KIT),  # not one of the options offered
        ("1 and 7", NEXT_STEPS),
        ("3 tests fail after the merge", NEXT_STEPS),
        ("Do the second part of the refactor and then run the whole suite again, please, thanks", NEXT_STEPS),
        ("A", ""),
    ],
)
def test_prompts_that_only_look_like_picks(answer, message):
    assert picked_options(answer, message) == []


def test_a_number_followed_by_the_options_own_words():
    assert [d.text for d in picked_options("2 clean up temp files", NEXT_STEPS)] == [
        "Decided (Would you like to): Clean up temp files (9 files)"
    ]


def test_options_in_a_code_block_or_an_earlier_list_are_not_offered():
    message = "Steps I ran:\n1. Build\n2. Test\n\n```\nA. not an option\nB. nor this\n```\n" + NEXT_STEPS
    assert [o.label for o in offered_options(message)] == ["Push to GitHub", "Clean up temp files", "Review the commit"]
    assert offered_options("```\n1. a\n2. b\n```") == []


def test_prompt_statements_reads_a_pick_or_else_the_prompts_own_sentences():
    assert prompt_statements("B", SPEC_KIT)[0].text.startswith("Decided (Admin User Role Model): Two roles")
    said = prompt_statements("In this repo we install packages with uv, never pip.", SPEC_KIT)
    assert [s.text for s in said] == ["In this repo we install packages with uv, never pip."]
    assert prompt_statements("B") == []
