"""engram: long-term memory and task continuity for AI agents, in one DuckDB file."""

from .clock import SystemClock, VirtualClock
from .config import Settings
from .engram import Engram, ModelMismatch
from .types import EngramError, Hit, Memory, NotFound, Session, StoreResult, Task

__version__ = "0.1.0"

__all__ = [
    "Engram", "EngramError", "Hit", "Memory", "ModelMismatch", "NotFound", "Session",
    "Settings", "StoreResult", "SystemClock", "Task", "VirtualClock", "__version__",
]
