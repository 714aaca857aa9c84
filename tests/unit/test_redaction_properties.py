"""The redactor over generated text (Hypothesis): it never raises, running it again changes
nothing, it only takes text out (each span replaced by its marker), and look-alikes of secrets
(git SHAs, digests, UUIDs, integrity hashes, CSS colours) in plain context stay byte for byte."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.core.redaction import REDACTED, Redactor
from tests.strategies import odd_text

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_set.json").read_text(encoding="utf-8"))
# Texts of the labelled set, cut and joined at random with generated text: secrets in odd places.
TEXTS = [it["text"] for it in SET["items"]]


def _set_text(i: int) -> str:
    return TEXTS[i]


PIECES = st.integers(0, len(TEXTS) - 1).map(_set_text)  # not sampled_from: its repr would hold them all
MIXED = st.lists(
    st.one_of(PIECES, odd_text, PIECES.flatmap(lambda t: st.integers(0, len(t)).map(lambda i: t[:i]))), max_size=5
).map(" ".join)

REDACT = Redactor()


@given(MIXED)
def test_redaction_is_idempotent_and_only_takes_text_out(text):
    once = REDACT(text)
    assert REDACT(once) == once
    # What is left is the text's own, in order: redaction replaces spans with its marker and adds
    # nothing else, never more than the span (a secret's neighbours stay).
    pos = 0
    for piece in once.split(REDACTED):
        found = text.find(piece, pos)
        assert found >= 0, (piece, text)
        pos = found + len(piece)


_hex = st.sampled_from("0123456789abcdef")


def _hexes(n: int):
    return st.lists(_hex, min_size=n, max_size=n).map("".join)


LOOK_ALIKES = st.one_of(
    _hexes(40).map(lambda h: f"commit {h}"),
    _hexes(7).map(lambda h: f"HEAD is now at {h} fix flaky test"),
    _hexes(40).map(lambda h: f"git checkout {h}"),
    _hexes(64).map(lambda h: f"image@sha256:{h}"),
    _hexes(64).map(lambda h: f"sha256:{h}"),
    st.uuids().map(lambda u: f"request {u} failed"),
    st.binary(min_size=64, max_size=64).map(lambda b: f'"integrity": "sha512-{base64.b64encode(b).decode()}"'),
    _hexes(6).map(lambda h: f"color: #{h};"),
)
NEUTRAL = st.lists(
    st.sampled_from(["The build", "ran", "then", "\n", " ", ".", ",", "(", ")", "ok", "see"]), max_size=6
)


@given(LOOK_ALIKES, NEUTRAL.map(" ".join), NEUTRAL.map(" ".join))
def test_look_alikes_in_plain_context_stay_byte_for_byte(look_alike, before, after):
    text = f"{before} {look_alike} {after}"
    assert REDACT(text) == text


@given(
    st.recursive(
        st.none() | st.integers() | MIXED,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(MIXED, c, max_size=3),
        max_leaves=8,
    )
)
def test_redacting_a_json_value_keeps_its_shape(value):
    out = REDACT.value(value)
    assert type(out) is type(value)
    assert REDACT.value(out) == out


# Found by the long run (python -m benchmarks.fuzz):
# - About 1 in 300 random lockfile integrity hashes was redacted: a cue word of _SECRET_CUE ("dSN",
#   "Key", "pwd"...) inside the base64 itself made its line "speak of a secret".
# - "SECRET:=" became "SECRET:[REDACTED]": a value of bare punctuation taken for a secret, and the
#   text made longer.
@pytest.mark.parametrize(
    "text",
    [
        '"integrity": "sha512-' + "A" * 41 + 'gEBBQEDCgUKCwcAAAGLJQETidSNABYAACIVRQIDoxMFHQ=="',
        "SECRET:=",
    ],
)
def test_look_alikes_the_long_run_found_stay(text):
    assert REDACT(text) == text
