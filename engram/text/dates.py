"""Time cues in text: dates a query names, and whether a memory mentions a time.

Recall uses them as small bonuses (see search/ranking.py): a memory written in a range the query
names ("what did we decide on 3 March?", "in October 2023") ranks higher, and so does one
that mentions a time ("yesterday", "last week", "on 3 May") when the query asks when.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import datetime, timezone

import numpy as np

from engram.core.clock import SECONDS_PER_DAY

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_ABBR = {m[:3]: i for i, m in enumerate(_MONTHS, start=1)} | {"sept": 9}
_MONTH = "|".join(sorted(set(_MONTHS) | set(_ABBR), key=len, reverse=True))


def _m(n: int) -> str:
    return rf"(?P<m{n}>{_MONTH})\.?"


def _d(n: int) -> str:
    return rf"(?P<d{n}>\d{{1,2}})(?:st|nd|rd|th)?"


def _y(n: int) -> str:
    return rf"(?P<y{n}>(?:19|20)\d\d)"


_DATE = re.compile(
    r"\b(?:"
    r"(?P<iy>(?:19|20)\d\d)-(?P<im>\d{1,2})-(?P<id>\d{1,2})"  # 2023-10-13
    rf"|{_d(1)}\s+(?:of\s+)?{_m(1)}(?:,?\s+{_y(1)})?"  # 13 October 2023
    rf"|{_m(2)}\s+{_d(2)}(?:,?\s+{_y(2)})?(?!\d)"  # October 13, 2023
    rf"|{_m(3)},?\s+{_y(3)}"  # October 2023
    rf"|{_m(4)}"  # October
    rf"|{_y(5)}"  # 2023
    r")\b",
    re.IGNORECASE,
)
# Relative time phrases, only detected (a memory that has one says when something happened).
_RELATIVE = re.compile(
    r"\b(?:today|tonight|yesterday|tomorrow|last night|this (?:morning|afternoon|evening)"
    r"|(?:last|next|this past|this coming) (?:week|weekend|month|year|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday|spring|summer|fall|autumn|winter)"
    r"|(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few) "
    r"(?:day|week|month|year)s? ago|the other (?:day|week)|recently)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(r"\s*(?:when\b|what (?:date|day|time|year|month)\b|how long ago\b)", re.IGNORECASE)


def _days(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=timezone.utc).timestamp() / SECONDS_PER_DAY


def _month(name: str) -> int:
    name = name.lower().rstrip(".")
    return _MONTHS.index(name) + 1 if name in _MONTHS else _ABBR[name if name == "sept" else name[:3]]


def query_dates(text: str, slack_days: float = 1.0) -> list[tuple]:
    """The time ranges a text names: ("span", start, end) in days since the epoch (a day
    widened by slack_days each side, a month, a year), ("month", m) for a month without a
    year, ("monthday", m, d) for a day without a year; [] when it names none."""
    out: list[tuple] = []
    for mt in _DATE.finditer(text):
        g = {k: v for k, v in mt.groupdict().items() if v}
        try:
            if "iy" in g:
                day = _days(int(g["iy"]), int(g["im"]), int(g["id"]))
                out.append(("span", day - slack_days, day + 1 + slack_days))
                continue
            n = next(k[1:] for k in g)
            name, d, y = g.get(f"m{n}"), g.get(f"d{n}"), g.get(f"y{n}")
            if name is None:  # a year alone
                year = int(g[f"y{n}"])
                out.append(("span", _days(year, 1, 1), _days(year + 1, 1, 1)))
                continue
            bare = name.lower().rstrip(".")
            if (
                d is None
                and y is None
                and (
                    bare not in _MONTHS or (bare == "may" and (not name[0].isupper() or not text[: mt.start()].strip()))
                )
            ):
                continue  # a bare "mar", "jun" or the verb "may" is too often another word
            m = _month(name)
            match y, d:
                case None, None:
                    out.append(("month", m))
                case None, str():
                    out.append(("monthday", m, int(d)))
                case str(), None:
                    out.append(("span", _days(int(y), m, 1), _days(int(y), m, monthrange(int(y), m)[1]) + 1))
                case str(), str():
                    day = _days(int(y), m, int(d))
                    out.append(("span", day - slack_days, day + 1 + slack_days))
        except ValueError:  # 31 February and the like
            continue
    return out


def match(selectors: list[tuple], days: np.ndarray, slack_days: float = 1.0) -> np.ndarray:
    """Which of `days` (days since the epoch) fall in any of query_dates' ranges."""
    days = np.asarray(days, dtype=np.float64)
    hit = np.zeros(len(days), dtype=bool)
    cal = None
    for sel in selectors:
        if sel[0] == "span":
            hit |= (days >= sel[1]) & (days < sel[2])
            continue
        if cal is None:
            dt = (np.nan_to_num(days) * SECONDS_PER_DAY).astype("datetime64[s]")
            month_start = dt.astype("datetime64[M]")
            cal = (
                month_start.astype(np.int64) % 12 + 1,
                (dt.astype("datetime64[D]") - month_start).astype(np.int64) + 1,
            )
        if sel[0] == "month":
            hit |= cal[0] == sel[1]
        else:
            hit |= (cal[0] == sel[1]) & (np.abs(cal[1] - sel[2]) <= slack_days)
    return hit & ~np.isnan(days)


def asks_when(query: str) -> bool:
    """A question whose answer is a time ("When did…", "What date…", "How long ago…")."""
    return _WHEN.match(query) is not None


def mentions_time(text: str) -> bool:
    """Whether a text says when something happened: a date or a relative time phrase."""
    return _RELATIVE.search(text) is not None or bool(query_dates(text))
