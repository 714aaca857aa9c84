"""The only package that speaks SQL."""

from .db import Store

__all__ = ["Store"]
