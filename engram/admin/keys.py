"""Per-user keys for a team: each person's agents send their own key, and the key is the user.

A key is `egk_` plus 32 random bytes (URL-safe base64). It is shown once, when made; the store
keeps only its SHA-256. A slow password hash (bcrypt, scrypt, argon2) exists to make guessing a
low-entropy password expensive; a 256-bit random secret cannot be guessed however fast the
hash, so one SHA-256 is enough, and it lets a request find its key by an indexed lookup of the
hash instead of trying a slow hash against every stored key.

Nothing is cached: every request looks its key up, so a revoked key is refused on the very next
request, by every server on the database (see server/http.py, which measures the cost).
The key commands are local administration (`engram keys ...` on the machine that owns the
store); no HTTP route or MCP tool makes, lists or revokes keys, so a key holder cannot mint one.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from engram.core.ids import new_id
from engram.core.types import EngramError, NotFound

__all__ = ["KEY_PREFIX", "create_key", "key_hash", "keys_in_use", "list_keys", "new_key", "revoke_key", "user_of"]

KEY_PREFIX = "egk_"  # recognisable in a config file or a leaked log, as GitHub's ghp_ is
MAX_LABEL = 200


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    """What the store keeps of a key: its SHA-256, hex (see the module docstring for why no slow hash)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _check_user(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 200:
        raise EngramError("user_id must be a non-empty string of at most 200 characters")
    return user_id


def _public(row: dict) -> dict:
    """A key as listed: never the key, never its hash."""
    return {
        "key_id": row["id"],
        "user_id": row["user_id"],
        "label": row["label"],
        "created_at": row["created_at"].isoformat(),
        "revoked_at": row["revoked_at"].isoformat() if row["revoked_at"] else None,
    }


def create_key(eng: Any, user_id: str, label: str | None) -> dict:
    """A new key for the user: {key_id, user_id, label, created_at, key}. The key is in this
    answer only; the store keeps its hash."""
    user = _check_user(user_id)
    if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL):
        raise EngramError(f"label must be a string of at most {MAX_LABEL} characters")
    key, key_id, now = new_key(), f"k-{new_id()}", eng.clock.now()
    eng.store_db.insert_key(key_id, user, key_hash(key), label or None, now)
    return {"key_id": key_id, "user_id": user, "label": label or None, "created_at": now.isoformat(), "key": key}


def list_keys(eng: Any, user_id: str | None) -> list[dict]:
    return [_public(r) for r in eng.store_db.list_keys(None if user_id is None else _check_user(user_id))]


def revoke_key(eng: Any, key_id: str) -> dict:
    """Revoke a key at once: the next request that sends it is refused."""
    if not isinstance(key_id, str) or not key_id:
        raise EngramError("key_id must be a non-empty string")
    if not eng.store_db.revoke_key(key_id, eng.clock.now()):
        known = {r["id"]: r for r in eng.store_db.list_keys(None)}
        if key_id in known:
            raise EngramError(f"key {key_id} was already revoked at {known[key_id]['revoked_at'].isoformat()}")
        raise NotFound(f"no key with id {key_id!r} (see `engram keys list`)")
    return next(_public(r) for r in eng.store_db.list_keys(None) if r["id"] == key_id)


def user_of(eng: Any, key: str) -> str | None:
    """The user a key acts as; None when it is no key, an unknown one or a revoked one."""
    return eng.store_db.key_user(key_hash(key))


def keys_in_use(eng: Any) -> bool:
    """True once any key was made (revoked ones too): requests must then carry a key or ENGRAM_TOKEN."""
    return eng.store_db.keys_in_use()
