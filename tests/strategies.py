"""Hypothesis strategies for outside input: text as people and tools write it, and JSON of the
right shapes with the wrong types, shared by the property tests of every reader."""

from __future__ import annotations

from hypothesis import strategies as st

# Characters that steer the text functions: sentence ends, quotes and brackets, line breaks, an
# ellipsis, capitals and digits after them, dashes, CJK, combining marks, zero-width and
# right-to-left marks, a lone surrogate (JSON's "\ud800" decodes to one), NUL.
_STEERING = list(".!?…\"')]([ \n\r\t:;,-—/\\=&#`*") + list("AZaz09Éé") + ["\u4e2d", "\u0301", "\u200b", "\u202e"]
_STEERING += ["\ud800", "\x00", "\ufeff", "Dr.", "e.g.", "...", " Then ", "\n\n", "```", "http://x.y/?a=b"]

odd_text = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(_STEERING), max_size=60).map("".join),
    st.lists(st.one_of(st.sampled_from(_STEERING), st.text(min_size=1, max_size=8)), max_size=40).map("".join),
)

# Any JSON value, small.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | odd_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


# A value of the wrong type: scalars of each kind as often as containers.
wrong_type = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), odd_text, st.lists(json_values, max_size=3), json_values
)


def _mostly(right):
    """`right` three times in four, else a value of any type."""
    return st.integers(0, 3).flatmap(lambda i: wrong_type if i == 0 else right)


def shaped(shape):
    """A JSON value of `shape` (a dict of field -> shape, a list of one shape, or a strategy),
    where a field may be missing or hold a value of another type, and an item of a list too."""
    if isinstance(shape, dict):
        fields = {k: _mostly(shaped(v)) for k, v in shape.items()}
        return st.fixed_dictionaries({}, optional=fields)
    if isinstance(shape, list):
        return st.lists(_mostly(shaped(shape[0])), max_size=4)
    return shape
