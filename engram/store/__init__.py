"""The only package that speaks SQL: the interface the engine needs (base.py) and its DuckDB implementation."""

from .base import MemoryStore
from .db import Store

__all__ = ["MemoryStore", "Store"]
