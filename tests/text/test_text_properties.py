"""Every text function capture and recall run on outside text, over generated text (Hypothesis):
none raises, and each keeps what it promises (chunks are verbatim slices covering the text,
sentences keep every word)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engram.text.chunking import chunk_spans, split_chunks
from engram.text.convention_sentences import conventions_in, topics_of
from engram.text.dates import asks_when, match, mentions_time, query_dates
from engram.text.option_picks import offered_options, picked_options, prompt_statements
from engram.text.statement_diff import compare_detail, covers, is_contradiction
from engram.text.statements import parse_statement, sentences
from engram.text.step_words import content, content_words
from engram.text.tokens import tokenize
from tests.strategies import odd_text


def _ink(text: str) -> str:
    return "".join(text.split())


@given(odd_text)
def test_sentences_keep_every_character_but_spaces(text):
    out = sentences(text)
    assert all(s.strip() for s in out)
    assert _ink(" ".join(out)) == _ink(text)


@given(odd_text, odd_text)
def test_statements_parse_and_compare(old, new):
    parse_statement(new)
    compare_detail(old, new)
    covers(old, new)
    is_contradiction(old, new)


@given(odd_text)
def test_conventions_are_sentences_of_the_prompt(prompt):
    for c in conventions_in(prompt):
        assert isinstance(c, str) and c.strip()
    topics_of(prompt)


@given(odd_text, odd_text)
def test_a_pick_is_a_decision_of_an_offered_option(prompt, message):
    options = offered_options(message)
    picks = picked_options(prompt, message)
    assert all(p.text.startswith("Decided") and p.text.strip() for p in picks)
    assert not picks or options  # never "A." alone: a pick needs the options it picks from
    assert all(s.text.strip() for s in prompt_statements(prompt, message))


OPTION_WORDS = st.sampled_from(["keep", "the", "cache", "in", "Redis", "option", "a", "B", "2", "yes", "`x/y`", "é"])


@given(st.lists(st.lists(OPTION_WORDS, min_size=1, max_size=5).map(" ".join), min_size=2, max_size=6), st.data())
def test_the_option_a_number_picks_is_that_option(labels, data):
    message = "Which one should we use?\n" + "\n".join(f"{i + 1}. {label}" for i, label in enumerate(labels))
    k = data.draw(st.integers(0, len(labels) - 1))
    [decision] = picked_options(
        data.draw(st.sampled_from(["{}", "{}.", "option {}", "go with {}"])).format(k + 1), message
    )
    assert decision.text == f"Decided (Which one should we use?): {labels[k]}" and decision.standing


# Days since the epoch as a stored date gives them: datetime's years 1 to 9999, or NaN (none).
DAYS = st.floats(-719_162, 2_932_896) | st.just(float("nan"))


@given(odd_text, st.lists(DAYS, max_size=5))
def test_dates(text, days):
    found = query_dates(text)
    assert match(found, np.array(days, dtype=np.float64)).shape == (len(days),)
    asks_when(text)
    mentions_time(text)


@given(
    st.lists(st.sampled_from(["Ab. ", "word ", "x", " ", "\n\n", "Long" * 30, "…", "\u4e2d"]), max_size=200).map(
        "".join
    )
    | st.text(max_size=3000),
    st.integers(20, 400),
    st.integers(0, 60),
)
def test_chunks_are_verbatim_slices_covering_the_text(text, size, overlap):
    spans = chunk_spans(text, size, min(overlap, size // 2))
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s0, e0), (s1, e1) in pairwise(spans):
        assert s0 < s1 <= e0 < e1  # each starts inside the one before and ends after it
    assert split_chunks(text, size, min(overlap, size // 2)) == [text[s:e] for s, e in spans]


@given(odd_text)
def test_tokens_and_step_words(text):
    assert all(isinstance(t, str) for t in tokenize(text))
    tokenize(text, query=True)
    content(text)
    content_words(text)
