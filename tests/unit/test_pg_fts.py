"""The full-text query of benchmarks/pg_fts: hostile words stay words, an empty query matches
nothing without an error, and the user filter holds, on a real PostgreSQL."""

from __future__ import annotations

import pytest

from engram.models.embedding import FakeEmbedder

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg")

from benchmarks.pg_fts import OR_TSQUERY, connect, fts, open_engram, or_of_lexemes  # noqa: E402

HOSTILE = ["it's", "a\\b", "x:*", "&", "|", "!", "(", ")", "<->", "a & b", "'", "''", "\\", "q:A*"]


@pytest.mark.parametrize("lexeme", HOSTILE)
def test_a_hostile_lexeme_is_one_literal_lexeme(pg_url, lexeme):
    with connect(pg_url) as con:
        q = con.execute(f"SELECT {or_of_lexemes('%(lex)s::text[]')}", {"lex": [lexeme]}).fetchone()[0]
        hits = con.execute(
            "SELECT array_to_tsvector(%(a)s::text[]) @@ %(q)s::tsquery, "
            "array_to_tsvector(ARRAY['other']) @@ %(q)s::tsquery",
            {"a": [lexeme], "q": q},
        ).fetchone()
    assert hits == (True, False), (lexeme, q)


def test_lexemes_are_ored_and_empty_ones_dropped(pg_url):
    with connect(pg_url) as con:
        q = con.execute(
            f"SELECT {or_of_lexemes('%(lex)s::text[]')}::text", {"lex": ["cat", "", "it's", "x:*"]}
        ).fetchone()[0]
        none = con.execute(f"SELECT {or_of_lexemes('%(lex)s::text[]')}", {"lex": []}).fetchone()[0]
    assert q == "'cat' | 'it''s' | 'x:*'"
    assert none is None


@pytest.mark.parametrize(
    ("cfg", "query", "expected"),
    [
        ("simple", "What did O'Brien deploy to Fly.io?", "'what' | 'did' | 'o' | 'brien' | 'deploy' | 'to' | 'fly.io'"),
        ("english", "What did O'Brien deploy to Fly.io?", "'o' | 'brien' | 'deploy' | 'fly.io'"),
        ("english", "cats & dogs | !birds :* (fish)", "'cat' | 'dog' | 'bird' | 'fish'"),
        ("simple", "", None),
        ("simple", "& | ! :* ( ) <-> ' \\", None),
        ("english", "what is it to them", None),  # stop words only
    ],
)
def test_the_query_is_the_or_of_its_own_lexemes(pg_url, cfg, query, expected):
    with connect(pg_url) as con:
        got = con.execute(f"SELECT {OR_TSQUERY}::text", {"cfg": cfg, "q": query}).fetchone()[0]

    # tsvector keeps its lexemes sorted, so the order of the OR is not the question's
    def lexemes(q):
        return None if q is None else set(q.split(" | "))

    assert lexemes(got) == lexemes(expected)


def test_fts_finds_any_word_ranks_the_fuller_match_first_and_keeps_to_the_user(pg_url, tmp_path):
    eng, _ = open_engram(pg_url, tmp_path, FakeEmbedder(16, "fake-16"))
    try:
        both = eng.store("Alice deployed the orders service to Fly.io", user_id="alice").memory.id
        one = eng.store("The orders arrived late on Friday", user_id="alice").memory.id
        eng.store("Bob deployed the orders service to Fly.io", user_id="bob")
        eng.store("Nothing in common here", user_id="alice")
    finally:
        eng.close()
    with connect(pg_url) as con:
        for cfg in ("simple", "english"):
            got = [i for i, _ in fts(con, cfg, "Which orders were deployed? & | !", "alice")]
            assert got[0] == both and set(got) == {both, one}, cfg
            assert fts(con, cfg, "& | ! :*", "alice") == []
            assert fts(con, cfg, "penguin", "alice") == []
