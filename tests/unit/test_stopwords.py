"""The stopword tables: statement reading and step matching each drop their own words, declared
against the tokenizer's one table (engram.text.tokens.STOPWORDS)."""

from engram.text.statements import STATEMENT_STOPWORDS
from engram.text.step_words import STEP_STOPWORDS
from engram.text.tokens import STOPWORDS

# The tables as each module wrote them out in full before they were declared against the base.
OLD_BASE = frozenset("""
a an and are as at be been but by can could did do does for from had has have he her hers him his
how i if in into is it its me my of on or our she so that the their them then there these they this
those to was we were what when where which who whom why will with would you your yours am about
""".split())
OLD_STATEMENT = frozenset("""
a an the this that these those it its it's they them their there here we our us you your i my me
he him his she her who whom whose which what when where why how
and or but so if then than as of to in on at by for from with into onto over under about
after before during until via per up down out off through between within upon across
am is are was were be been being has have had do does did will would can could shall should may
might must 's
very really just quite rather only even still already always usually often sometimes every
each all any some many much more most few several other same such own
please kindly ok okay
""".split())
OLD_STEP = frozenset("""
    a an the and or but of to in into on onto
    for from with without by at as via per is are was
    were be been being am it its this that these those there
    their them they we our us i my me you your he
    she his her so than then too very just also only all
    any every each some more most other such same own both few
    out off over under again further once here when where why how
    what which who whom whose can could should would will shall may
    might must do does did doing done have has had having not
    no nor up down about after before between through during above below
    until while if else now still yet already get got getting make instead
    made makes let lets etc eg ie
""".split())


def test_each_table_is_what_it_was():
    assert STOPWORDS == OLD_BASE
    assert STATEMENT_STOPWORDS == OLD_STATEMENT
    assert STEP_STOPWORDS == OLD_STEP
