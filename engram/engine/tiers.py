"""How long a memory lasts (docs/lifecycle.md): its tier and time to live at write, a
restatement's refreshed expiry, moving it to another tier, pinning it."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from engram.core.settings import Settings
from engram.core.types import EngramError, Memory, check_tier, default_tier
from engram.engine.state import EngineState


def lifecycle_of(
    settings: Settings,
    memory_type: str,
    tags: tuple[str, ...],
    conversation: str | None,
    tier: Any,
    ttl_days: Any,
) -> tuple[str, float | None]:
    """A new memory's tier (given, else from its type and origin) and time to live (ttl_of)."""
    tier = default_tier(memory_type, tags, conversation) if tier is None else check_tier(tier)
    return tier, ttl_of(settings, memory_type, tier, ttl_days)


def ttl_of(settings: Settings, memory_type: str, tier: str, ttl_days: Any) -> float | None:
    """A new memory's time to live in days: its own, else ENGRAM_TTL_DAYS' for its type, else
    for its tier; None: it never expires."""
    if ttl_days is not None:
        if isinstance(ttl_days, bool) or not isinstance(ttl_days, int | float) or not 0 < ttl_days <= 36500:
            raise EngramError(f"ttl_days must be a number of days above 0 and at most 36500, got {ttl_days!r}")
        return float(ttl_days)
    defaults = settings.default_ttls()
    return defaults.get(memory_type, defaults.get(tier))


def refreshed_expiry(old: Memory, ttl_days: float | None, now: datetime) -> datetime:
    """When a memory that expires does so once restated at `now`: a full time to live from now
    (the restatement's, else the span the memory was first given), never earlier than it was."""
    assert old.expires_at is not None, "refreshed_expiry is for a memory that expires"
    span = timedelta(days=ttl_days) if ttl_days is not None else old.expires_at - old.created_at
    return max(old.expires_at, now + span)


class Tiers:
    """The facade's part that pins memories and moves them between tiers."""

    def __init__(self, p: EngineState):
        self.p = p

    def pin_memory(self, memory_id: str, pinned: bool, *, user_id: str | None = None) -> Memory:
        """Pin (never decays in ranking, never pruned or consolidated) or unpin a memory."""
        if not isinstance(pinned, bool):
            raise EngramError(f"pinned must be true or false, got {pinned!r}")
        with self.p.lock:
            old = self.p.memory(memory_id, user_id)
            now = self.p.clock.now()
            with self.p.store_db.transaction():
                self.p.store_db.update_memory(old.id, pinned=pinned, updated_at=now)
                self.p.store_db.add_event(old.id, now, "pin" if pinned else "unpin")
            mem = self.p.store_db.get_memory(old.id)
            self.p.index.upsert(mem, None)
            self.p.activity_epoch += 1
        return mem

    def set_tier(self, memory_id: str, tier: str, *, user_id: str | None = None) -> dict:
        """Move a memory to another tier (engram.core.types.MEMORY_TIERS), recorded in its history
        as a `tier` event {from, to}; its decay follows at once (the tier scales its stability when
        read). Returns {memory_id, tier, was, action: "tier" | "unchanged"}."""
        check_tier(tier)
        with self.p.lock:
            old = self.p.memory(memory_id, user_id)
            if old.status != "active":
                raise EngramError(f"memory {memory_id} is {old.status}; only active memories change tier")
            if old.tier == tier:
                return {"memory_id": old.id, "tier": tier, "was": old.tier, "action": "unchanged"}
            now = self.p.clock.now()
            with self.p.store_db.transaction():
                self.p.store_db.update_memory(old.id, tier=tier, updated_at=now)
                self.p.store_db.add_event(old.id, now, "tier", {"from": old.tier, "to": tier})
            self.p.index.upsert(replace(old, tier=tier, updated_at=now), None)
            self.p.activity_epoch += 1
        return {"memory_id": old.id, "tier": tier, "was": old.tier, "action": "tier"}
