"""The JSON encoder every adapter shares (HTTP, the daemon's socket, the CLI)."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

__all__ = ["dumps", "json_default"]


def json_default(o: Any) -> Any:
    """What every adapter (HTTP, the daemon's socket, the CLI) makes of values JSON has no type for."""
    if isinstance(o, datetime | date | time):
        return o.isoformat()
    if type(o).__module__ == "numpy":
        # Imported lazily: a client process should not pay for numpy.
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        # Domain types curate their wire form in to_dict(); others get every field.
        to_dict = getattr(o, "to_dict", None)
        return to_dict() if callable(to_dict) else dataclasses.asdict(o)
    if isinstance(o, set | frozenset):
        try:
            return sorted(o)
        except TypeError:
            return list(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def dumps(obj: Any, **kw: Any) -> str:
    """JSON text with the shared encoder; keyword arguments as json.dumps (indent, separators...)."""
    return json.dumps(obj, default=json_default, **kw)
