"""Graph expansion's links (engram/search/links.py): a hit's conversation neighbours and the
memories naming its rare words, over a real index."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engram import Engram
from engram.search import links


@pytest.fixture
def store(settings, fake, clock):
    e = Engram(
        ":memory:", settings=replace(settings, context_window=2, late_interaction=False), embedder=fake, clock=clock
    )
    yield e
    e.close()


def _rows(eng, *results):
    return [eng.index.row_of[r.memory.id] for r in results]


def test_neighbours_are_the_turns_just_before_and_after(store):
    turns = store.store_many(
        [
            {"content": f"Ana: turn {w}", "conversation": "c1", "resolve_conflicts": False}
            for w in ("one", "two", "three", "four")
        ]
    )
    one, two, three, four = _rows(store, *turns)
    fact = _rows(store, store.store("The deploy key rotates monthly"))[0]
    assert links.neighbours(store.index, two) == {one, three}
    assert links.neighbours(store.index, one) == {two}
    assert links.neighbours(store.index, four) == {three}
    assert links.neighbours(store.index, fact) == set()  # a memory outside any conversation


def test_rare_words_are_the_hits_words_few_others_hold(store):
    a = store.store("The kestrel service writes to the orion queue").memory
    b = store.store("The orion queue is drained every night").memory
    for job in ("billing", "mail", "search"):
        store.store(f"The {job} service writes logs every night", resolve_conflicts=False)
    idx = store.index
    mask = idx.mask(store.user_of(None))
    ra, rb = idx.row_of[a.id], idx.row_of[b.id]
    words = links.rare_words(idx, ra, mask, int(mask.sum()), skip={"kestrel"})
    assert words["orion"] == [rb]  # held by the hit and one other memory
    assert "kestrel" not in words  # a word of the query is no link: the query found it already
    assert "service" not in words  # four of five memories hold it: no link


def test_linked_weighs_each_link_by_the_anchors_share(store):
    a = store.store("The kestrel service writes to the orion queue").memory
    b = store.store("The orion queue is drained every night").memory
    c = store.store("The billing service writes logs every night").memory
    idx = store.index
    mask = idx.mask(store.user_of(None))
    ra, rb, rc = (idx.row_of[m.id] for m in (a, b, c))
    full = links.linked(idx, [(ra, 1.0)], mask, set())
    half = links.linked(idx, [(ra, 0.5)], mask, set())
    assert 0 < full[rb] <= 1.0 and half[rb] == pytest.approx(full[rb] / 2)
    assert ra not in full  # an anchor is not linked to itself
    mask[rb] = False  # a memory the caller may not see is never linked
    assert rb not in links.linked(idx, [(ra, 1.0)], mask, set())
    # In a store of three, two holders is few: "service" and "writes" link the billing memory too.
    assert rc in links.linked(idx, [(ra, 1.0)], idx.mask(store.user_of(None)), set())
