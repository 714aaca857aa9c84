"""Tokenising for BM25: an irregular verb's past form counts as its base form."""

from __future__ import annotations

import pytest

from engram.search.bm25 import BM25Index
from engram.text.tokens import tokenize


def test_a_question_in_the_base_form_finds_the_text_in_the_past():
    assert tokenize("When did Melanie buy the figurines?", query=True) == ["melani", "buy", "figurin"]
    assert tokenize("Melanie: I bought two figurines yesterday!") == ["melani", "buy", "two", "figurin", "yesterday"]
    assert tokenize("we went there, she gave a speech, they ran, it was written") == [
        "go",
        "give",
        "speech",
        "run",
        "write",
    ]
    idx = BM25Index()
    idx.add(0, "Melanie: I bought two figurines at the craft fair.")
    idx.add(1, "Melanie: I want to buy a new bike this year.")
    idx.add(2, "Caroline: The figurines on the shelf are my grandmother's.")
    scores = idx.score("When did Melanie buy the figurines?")
    assert max(scores, key=scores.get) == 0  # the only memory with all three words


def test_forms_that_are_as_often_other_words_are_left_alone():
    # "left" (the side), "a bit", "rose" (the flower), "ground", "lay": not read as verbs.
    assert tokenize("turn left a bit past the rose bed on the ground") == [
        "turn",
        "left",
        "bit",
        "past",
        "rose",
        "bed",
        "ground",
    ]
    assert tokenize("bought") == tokenize("buy") == tokenize("buying") == ["buy"]


def _store(*texts: str, known: frozenset[str] = frozenset()) -> BM25Index:
    idx = BM25Index()
    for i, t in enumerate(texts):
        idx.add(i, t)
    idx.known_words = known
    return idx


def test_a_misspelt_query_word_finds_the_stored_word_one_edit_away():
    idx = _store(
        "Tom moved from Lisbon to Porto in March.",
        "Pitfall: PgBouncer in transaction mode breaks prepared statements.",
        "Tom has a greyhound called Pastel.",
    )
    # A swap, a missing letter, a wrong letter, an extra letter: each one edit.
    assert idx.corrections("Tom mvoed to Prto") == {"mvoed": ("moved",), "prto": ("porto",)}
    assert idx.corrections("pgbouncr prepard statments") == {
        "pgbouncr": ("pgbouncer",),
        "prepard": ("prepared",),
        "statments": ("statements",),
    }
    assert idx.corrections("greyhoound cakled") == {"greyhoound": ("greyhound",), "cakled": ("called",)}
    scores = idx.score("Tom mvoed to Prto")
    assert max(scores, key=scores.get) == 0
    _, cover, held = idx.match("pgbouncr prepard statments", 3)
    assert cover[1] == pytest.approx(1.0) and held[1] == 3.0  # read as the three stored words


def test_a_misspelt_word_may_stand_for_several_stored_words_and_the_rest_of_the_query_decides():
    idx = _store(
        "Run flutter clean after an upgrade or the iOS build fails with a stale Pods error.",
        "Chen owns the billing service.",
        "Chen reviews the Flutter code.",
    )
    assert set(idx.corrections("flutter clen stale pods")["clen"]) == {"clean", "chen"}
    scores = idx.score("flutter clen stale pods")
    assert max(scores, key=scores.get) == 0
    # Held once per row, whichever of its readings the row has.
    _, _, held = idx.match("clen", 3)
    assert held.tolist() == [1.0, 1.0, 1.0]


def test_words_that_are_not_typos_are_left_alone():
    idx = _store(
        "Tom likes biking on weekends.",
        "The invoice total was 2023 euros.",
        "The cat sat on the mat.",
        known=frozenset({"hiking", "biking"}),
    )
    assert idx.corrections("Does Tom like hiking?") == {}  # a real word: the model knows it
    assert idx.corrections("the 2024 total") == {}  # a number one digit off is another number
    assert idx.corrections("the cap") == {}  # too short: too many words one edit away
    assert idx.corrections("Tom likes biking") == {}  # stored as it is
    assert idx.score("Does Tom like hiking?").keys() == {0}  # by "tom" and "like", not by a correction
    assert idx.corrections("xylophones") == {}  # nothing stored is one edit away


def test_a_removed_row_no_longer_lends_its_words_to_corrections():
    idx = _store("The staging server listens on port 8443.", "Deploys go to Fly.io.")
    assert idx.corrections("stagng") == {"stagng": ("staging",)}
    idx.remove(0)
    assert idx.corrections("stagng") == {}


def test_a_long_query_tries_only_its_first_words_that_might_be_misspelt():
    from engram.search.bm25 import SPELL_MAX_WORDS

    idx = _store("The staging server listens on port 8443.")
    noise = " ".join(f"zzq{chr(97 + i // 26)}{chr(97 + i % 26)}x" for i in range(40))  # 40 unknown words
    assert idx.corrections(f"stagng {noise}") == {"stagng": ("staging",)}
    assert idx.corrections(f"{noise} stagng") == {}  # past the first SPELL_MAX_WORDS unknown words
    assert SPELL_MAX_WORDS < 40
