"""Precision of what recall returns, one definition for every harness (recall_eval, agent_mcp).

Hit@k says whether the right memory is near the top; it cannot see the unrelated memories
returned beside it, which recall also reinforces. For each answered query (any kind but
`none`) that returned something, precision is the share of its returned memories that are
labelled relevant; the table gives the mean over those queries, and the mean number of
unrelated memories returned (and so reinforced) per answered query, counting the queries that
returned nothing as 0. A `none` query has no relevant memory: every memory it returns is
unrelated, so its figures are the share returning nothing and the mean returned.
"""

from __future__ import annotations

from collections.abc import Iterable


def precision(answers: Iterable[tuple[str, list[bool]]]) -> dict[str, float | int]:
    """answers: (kind, one flag per returned memory, True when it is labelled relevant).

    Returns {"n", "precision", "unrelated", "returned"} over the answered queries and
    {"none_n", "none_empty", "none_returned"} over the `none` ones (0.0 where there are none).
    """
    answered, nones = [], []
    for kind, flags in answers:
        (nones if kind == "none" else answered).append(list(flags))
    some = [f for f in answered if f]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    return {
        "n": len(answered),
        "precision": mean([sum(f) / len(f) for f in some]),
        "unrelated": mean([len(f) - sum(f) for f in answered]),
        "returned": mean([len(f) for f in answered]),
        "none_n": len(nones),
        "none_empty": mean([float(not f) for f in nones]),
        "none_returned": mean([len(f) for f in nones]),
    }
