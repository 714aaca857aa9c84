"""Tokenising for BM25: an irregular verb's past form counts as its base form."""

from __future__ import annotations

from engram.lexical import BM25Index, tokenize


def test_a_question_in_the_base_form_finds_the_text_in_the_past():
    assert tokenize("When did Melanie buy the figurines?", query=True) == ["melani", "buy", "figurin"]
    assert tokenize("Melanie: I bought two figurines yesterday!") == ["melani", "buy", "two", "figurin", "yesterday"]
    assert tokenize("we went there, she gave a speech, they ran, it was written") == \
        ["go", "give", "speech", "run", "write"]
    idx = BM25Index()
    idx.add(0, "Melanie: I bought two figurines at the craft fair.")
    idx.add(1, "Melanie: I want to buy a new bike this year.")
    idx.add(2, "Caroline: The figurines on the shelf are my grandmother's.")
    scores = idx.score("When did Melanie buy the figurines?")
    assert max(scores, key=scores.get) == 0  # the only memory with all three words


def test_forms_that_are_as_often_other_words_are_left_alone():
    # "left" (the side), "a bit", "rose" (the flower), "ground", "lay": not read as verbs.
    assert tokenize("turn left a bit past the rose bed on the ground") == \
        ["turn", "left", "bit", "past", "rose", "bed", "ground"]
    assert tokenize("bought") == tokenize("buy") == tokenize("buying") == ["buy"]
