"""Checks of the values a caller passes: each raises EngramError naming the field and the problem."""

from __future__ import annotations

import math
from typing import Any

from engram.core.errors import InvalidArguments
from engram.core.types import MEMORY_TYPES, EngramError


def check_text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise EngramError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise EngramError(f"{name} must not be empty")
    if len(value) > limit:
        raise EngramError(f"{name} is {len(value):,} characters; the limit is {limit:,}")
    if "\x00" in value:
        raise EngramError(f"{name} contains a NUL character")
    return value


def check_importance(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise EngramError(f"importance must be a number between 0 and 1, got {v!r}")
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise EngramError(f"importance must be between 0 and 1, got {v!r}")
    return float(v)


def check_type(v: Any) -> str:
    if v not in MEMORY_TYPES:
        raise EngramError(f"memory_type must be one of {', '.join(MEMORY_TYPES)}; got {v!r}")
    return v


def check_conversation(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip() or len(v) > 200:
        raise EngramError("conversation must be a non-empty string of at most 200 characters")
    return v


def check_items(value: Any, name: str) -> list[str]:
    """A list of short strings (a handoff's steps, items), stripped, the empty ones dropped."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise EngramError(f"{name} must be a list of strings")
    if len(value) > 100:
        raise EngramError(f"{name} has {len(value)} items; at most 100")
    longest = max((len(v) for v in value), default=0)
    if longest > 2000:  # a step or item, not a document: it is printed whole in every handoff view
        raise EngramError(f"{name}: an item is at most 2,000 characters; got one of {longest:,}")
    return [v.strip() for v in value if v.strip()]


def check_short(value: Any, name: str, limit: int = 2000, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise EngramError(f"{name} must be a string")
    if required and not value.strip():
        raise EngramError(f"{name} must not be empty")
    if len(value) > limit:
        raise EngramError(f"{name} is {len(value):,} characters; the limit is {limit:,}")
    return value.strip()


def check_whole(value: Any, name: str, low: int, high: int) -> int:
    """A whole number from low to high (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EngramError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


def refuse_unknown(where: str, given: Any, accepted: tuple[str, ...]) -> None:
    """Refuse keys that are not accepted: a misspelt argument must not vanish silently."""
    unknown = sorted(str(k) for k in given if k not in accepted)
    if unknown:
        raise InvalidArguments(
            f"{where}: unknown argument(s): {', '.join(unknown)}; accepted: {', '.join(accepted) or '(none)'}"
        )
