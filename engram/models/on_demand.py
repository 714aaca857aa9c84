"""An optional model of recall's second stages (the cross-encoder, the late-interaction reader):
loaded at its first use and kept, and, when it cannot load (its wheel missing, a damaged file),
said once in the log and left alone until the process restarts, recall keeping the first
stage's order meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from engram.core.errors import ModelUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


class OnDemand(Generic[T]):
    def __init__(self, load: Callable[[], T], what: str):
        self._load, self._what = load, what
        self._model: T | None = None
        self.failed = False

    @property
    def model(self) -> T | None:
        """The model if it is loaded (nothing is loaded here)."""
        return self._model

    def get(self) -> T | None:
        """The model, loaded now if it is not yet; None when it cannot load."""
        if self.failed:
            return None
        if self._model is None:
            try:
                self._model = self._load()
            except (ModelUnavailable, OSError, RuntimeError) as e:
                self.failed = True
                log.warning("%s unavailable, recall keeps the first stage's order: %s", self._what, e)
                return None
        return self._model
