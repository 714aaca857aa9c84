"""The one argument check every MCP tool call and HTTP request goes through (engram.ops.check),
over generated arguments (Hypothesis): declared and unknown names, values of every JSON type,
lone surrogates, non-finite numbers, deep nesting. It returns the checked arguments or raises
EngramError naming the operation; never another exception. (tests/server/test_hostile.py sends
the same kind of input through the real MCP and HTTP servers.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.core.types import EngramError
from engram.ops import check
from engram.ops.table import OPS
from tests.strategies import json_values, wrong_type


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = st.one_of(
    wrong_type,
    st.just("\ud800"),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.integers(1, 200).map(_nested),
)


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_argument_check_returns_or_names_the_problem(name):
    declared = list(OPS[name].names) or ["x"]

    @given(
        st.dictionaries(st.sampled_from([*declared, "unknown_arg"]), st.one_of(HOSTILE, json_values), max_size=6)
        | wrong_type
    )
    def run(args):
        try:
            out = check(name, args)
        except EngramError as e:
            assert name in str(e) or "arguments" in str(e), e
        else:
            assert set(out) == set(OPS[name].names)

    run()
