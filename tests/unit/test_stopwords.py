"""The stopword tables: statement reading and step matching each drop their own words, declared
against the tokenizer's one table (engram.text.tokens.STOPWORDS). What each adds and keeps is
written out here, so a change to one of them is a change to this test too."""

from engram.text.statements import STATEMENT_STOPWORDS
from engram.text.step_words import STEP_STOPWORDS
from engram.text.tokens import MORE_FUNCTION_WORDS, STOPWORDS

BASE = """
a an and are as at be been but by can could did do does for from had has have he her hers him his
how i if in into is it its me my of on or our she so that the their them then there these they this
those to was we were what when where which who whom why will with would you your yours am about
"""
# Both of the others drop these too (MORE_FUNCTION_WORDS): prepositions, quantifiers, modals.
BOTH_ADD = """
after all already any before being between down during each every few here just may might more
most must off only onto other out over own per same shall should some still such than through
under until up us very via whose
"""
STATEMENT_ADDS = """
's it's across always even kindly many much often ok okay please quite rather really several
sometimes upon usually within
"""
STEP_ADDS = """
above again also below both doing done eg else etc further get getting got having ie instead let
lets made make makes no nor not now once too while without yet
"""


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def test_the_base_table_is_bm25s_and_the_shared_additions_are_beyond_it():
    base, more = STOPWORDS, MORE_FUNCTION_WORDS
    assert base == words(BASE)
    assert more == words(BOTH_ADD) and not more & base


def test_statement_reading_adds_its_function_words_and_keeps_two_pronouns():
    table = STATEMENT_STOPWORDS
    assert table - STOPWORDS == words(BOTH_ADD) | words(STATEMENT_ADDS)
    assert {"hers", "yours"} == STOPWORDS - table
    assert len(table) == 130


def test_step_matching_adds_its_function_words_and_keeps_three_pronouns():
    table = STEP_STOPWORDS
    assert table - STOPWORDS == words(BOTH_ADD) | words(STEP_ADDS)
    assert {"hers", "him", "yours"} == STOPWORDS - table
    assert len(table) == 140
