"""Keep: a memory captured automatically becomes one the user vouches for (the panel's "keep", `engram keep`).

What capture marks (engram.workflows.capture, engram.continuity.conventions): every capture
carries the tag `auto-capture`, and a convention metadata.captured = "auto" too (the only mark of
one captured before conventions were tagged). Keeping
removes the mark (metadata.captured becomes "kept", so where it came from stays readable) and
makes the memory durable in the engine's own terms:

- an episode becomes a `fact` with its text, of a fact's importance at least: it decays as a
  fact, leaves the per-project episode budget (maintenance prunes only episodes) and is no
  longer left out of context blocks as a captured turn is;
- a pitfall stays a `failure` tagged `pitfall` (related_failures finds it by its component),
  a convention stays a `fact` tagged `convention` (the session-start block lists it): each only
  loses its mark, and a kept convention goes through the ordinary per-prompt rule;
- a convention candidate (a rule said once, engram.continuity.conventions) is confirmed: it
  loses the tag `convention-candidate` and is given back as any convention. `confirm_convention`
  does that alone, when capture hears the rule again: still marked automatic.

Its tier follows (docs/lifecycle.md): a kept convention becomes procedural (a rule the user
vouches for, close to permanent), a kept episode semantic (a fact); the move is recorded as a
`tier` event beside the `keep` one. Nothing is pinned: the user pins from the panel if wanted.
Keeping a memory that carries no mark changes nothing and says so.
"""

from __future__ import annotations

from engram.continuity.conventions import CANDIDATE_TAG
from engram.core.errors import EngramError
from engram.core.types import AUTO_CAPTURE_TAG, EPISODE_TYPE, MEMORY_TIERS, Memory, default_tier
from engram.engine.state import EngineState
from engram.search.decay import initial_stability

__all__ = ["Keeping", "is_captured"]

KEPT_TYPE = "fact"  # what a kept episode becomes
KEPT_IMPORTANCE = 0.5  # a plain fact's: a kept turn is worth what a stored fact is


def is_captured(m: Memory) -> bool:
    """Whether `m` still carries a mark of automatic capture."""
    return AUTO_CAPTURE_TAG in m.tags or (m.metadata or {}).get("captured") == "auto"


class Keeping:
    """The facade's part for keeping captured memories."""

    def __init__(self, p: EngineState):
        self.p = p

    def keep_memory(self, memory_id: str, *, user_id: str | None = None) -> dict:
        """Make an automatically captured memory durable (see the module's docstring). Returns
        {memory_id, action: "keep" | "unchanged", memory_type, tags, was: {memory_type, tags}};
        NotFound for an unknown id, an error for a memory that is not active."""
        with self.p.lock:
            old = self.p.memory(memory_id, user_id)
            if old.status != "active":
                raise EngramError(f"memory {memory_id} is {old.status}; only active memories can be kept")
            was = {"memory_type": old.memory_type, "tags": list(old.tags)}
            if not is_captured(old):
                return {
                    "memory_id": old.id,
                    "action": "unchanged",
                    "memory_type": old.memory_type,
                    "tags": list(old.tags),
                    "was": was,
                    "reason": "not captured automatically (or already kept): nothing to do",
                }
            now = self.p.clock.now()
            fields = _kept_fields(old)
            with self.p.store_db.transaction():
                self.p.store_db.update_memory(old.id, updated_at=now, **fields)
                self.p.store_db.add_event(old.id, now, "keep", {"was": was})
                if fields["tier"] != old.tier:
                    self.p.store_db.add_event(
                        old.id, now, "tier", {"from": old.tier, "to": fields["tier"], "by": "keep"}
                    )
            mem = self.p.store_db.get_memory(old.id)
            self.p.index.upsert(mem, None)
            self.p.activity_epoch += 1
        return {
            "memory_id": mem.id,
            "action": "keep",
            "memory_type": mem.memory_type,
            "tags": list(mem.tags),
            "tier": mem.tier,
            "was": was,
        }

    def confirm_convention(self, memory_id: str, *, user_id: str | None = None) -> dict:
        """A convention candidate confirmed (the user said it again): it loses the tag
        `convention-candidate`, keeping its mark of automatic capture. Returns {memory_id,
        action: "confirm" | "unchanged", tags}."""
        with self.p.lock:
            old = self.p.memory(memory_id, user_id)
            if CANDIDATE_TAG not in old.tags or old.status != "active":
                return {"memory_id": old.id, "action": "unchanged", "tags": list(old.tags)}
            now = self.p.clock.now()
            tags = tuple(t for t in old.tags if t != CANDIDATE_TAG)
            with self.p.store_db.transaction():
                self.p.store_db.update_memory(old.id, updated_at=now, tags=tags)
                self.p.store_db.add_event(old.id, now, "confirm", {"was": {"tags": list(old.tags)}})
            mem = self.p.store_db.get_memory(old.id)
            self.p.index.upsert(mem, None)
            self.p.activity_epoch += 1
        return {"memory_id": mem.id, "action": "confirm", "tags": list(mem.tags)}


def _kept_fields(old: Memory) -> dict:
    """The columns that make `old` durable: its mark gone, an episode made a fact."""
    drop = {AUTO_CAPTURE_TAG, CANDIDATE_TAG} | ({EPISODE_TYPE} if old.memory_type == EPISODE_TYPE else set())
    fields: dict = {
        "tags": tuple(t for t in old.tags if t not in drop),
        "metadata": {**(old.metadata or {}), "captured": "kept"},
    }
    if old.memory_type == EPISODE_TYPE:
        importance = max(old.importance, KEPT_IMPORTANCE)
        fields.update(memory_type=KEPT_TYPE, importance=importance)
        if old.stability is not None:  # grown by recalls from an episode's fast-fading start
            fields["stability"] = max(old.stability, initial_stability(KEPT_TYPE, importance))
    # The tier a memory of its kept type and tags gets; a tier the user chose above it stays.
    tier = default_tier(fields.get("memory_type", old.memory_type), fields["tags"])
    fields["tier"] = max(tier, old.tier, key=MEMORY_TIERS.index)
    return fields
