"""Bring memories in from other tools: the MCP memory server's memory.json, a mem0 export, notes
in markdown. Each source becomes a list of memories stored through the usual write path, so
resolution (reinforce, merge, replace) applies to them as to any store.

Idempotent: every imported item leaves a ledger key in the database (source, user and a hash of
its text), and a later import skips items whose key is there, whatever resolution made of them
(a merged item no longer exists as its own row, yet it was imported). A dry run stores the items
in a transaction it rolls back, so it reports exactly what resolution would do, then restores
the indexes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.core.types import EngramError

if TYPE_CHECKING:
    from engram.engram import Engram

SOURCES = ("mcp-memory", "mem0", "markdown")
MARKDOWN_SUFFIXES = (".md", ".markdown")
LEDGER_PREFIX = "imported"


@dataclass(frozen=True)
class Item:
    """One memory to import, with where it came from (kept in its metadata)."""

    content: str
    tags: tuple[str, ...] = ()
    memory_type: str = "fact"
    origin: dict[str, Any] = field(default_factory=dict)


class _DryRun(Exception):
    """Raised inside the import transaction to roll it back."""


# ---------------------------------------------------------------- the MCP memory server


def parse_mcp_memory(path: Path) -> list[Item]:
    """memory.json of the MCP reference memory server: JSON Lines of
    {"type": "entity", "name", "entityType", "observations": [...]} and
    {"type": "relation", "from", "to", "relationType"} (older files: one object with "entities"
    and "relations" lists). Each observation becomes "<name>: <observation>", each relation
    "<from> <relation type> <to>", and an entity without observations "<name> is a <type>"."""
    text = _read_text(path)
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None  # JSON Lines, the server's format
    if isinstance(whole, dict) and ("entities" in whole or "relations" in whole):
        records = _graph_records(whole)
    elif isinstance(whole, list):
        records = [r for r in whole if isinstance(r, dict)]
    else:
        records = [_json(line, path, no) for no, line in enumerate(text.splitlines(), 1) if line.strip()]
    items = []
    for no, r in enumerate(records, 1):
        kind = r.get("type")
        if kind == "entity":
            name, etype = _field(r, "name", path, no), str(r.get("entityType") or "").strip()
            said = _spoken(name)
            tags = _tags("mcp-memory", etype)
            obs = r.get("observations") or []
            if not isinstance(obs, list):
                raise EngramError(f"{path}: record {no}: observations must be a list")
            for o in obs:
                if isinstance(o, str) and o.strip():
                    items.append(Item(f"{said}: {o.strip()}", tags, origin={"entity": name}))
            if not any(isinstance(o, str) and o.strip() for o in obs) and etype:
                items.append(Item(f"{said} is a {_spoken(etype)}", tags, origin={"entity": name}))
        elif kind == "relation":
            src, dst = _field(r, "from", path, no), _field(r, "to", path, no)
            rel = _field(r, "relationType", path, no).replace("_", " ")
            items.append(
                Item(
                    f"{_spoken(src)} {rel} {_spoken(dst)}",
                    _tags("mcp-memory", "relation"),
                    origin={"relation": [src, r["relationType"], dst]},
                )
            )
        else:
            raise EngramError(f"{path}: record {no}: type must be 'entity' or 'relation', got {kind!r}")
    return items


def _spoken(name: str) -> str:
    """John_Smith -> John Smith: the words a query would use (the name stays in the origin)."""
    return name.replace("_", " ")


def _graph_records(obj: dict) -> list[dict]:
    ents = [{"type": "entity", **e} for e in obj.get("entities") or [] if isinstance(e, dict)]
    rels = [{"type": "relation", **r} for r in obj.get("relations") or [] if isinstance(r, dict)]
    return ents + rels


# ---------------------------------------------------------------- mem0


def parse_mem0(path: Path) -> list[Item]:
    """A mem0 export: what get_all() returns ({"results": [...]}), a plain list of memories, or
    {"memories": [...]}. Each memory is {"id", "memory", "user_id", "agent_id", "metadata",
    "categories", "created_at", "updated_at", ...}; its text is "memory", its categories become
    tags, and the rest is kept in the metadata under "origin"."""
    data = _json(_read_text(path), path, 1)
    rows = data
    if isinstance(data, dict):
        rows = data.get("results", data.get("memories"))
    if not isinstance(rows, list):
        raise EngramError(
            f"{path}: not a mem0 export: expected a list of memories, or an object "
            "with a 'results' (get_all) or 'memories' list"
        )
    items = []
    for no, r in enumerate(rows, 1):
        if not isinstance(r, dict):
            raise EngramError(f"{path}: memory {no} is not an object")
        text = _field(r, "memory", path, no)
        cats = r.get("categories") or []
        tags = _tags("mem0", *(c for c in cats if isinstance(c, str)))
        origin = {
            k: r[k]
            for k in ("id", "user_id", "agent_id", "app_id", "run_id", "created_at", "updated_at", "metadata")
            if r.get(k) not in (None, "", {})
        }
        items.append(Item(text, tags, origin=origin))
    return items


# ---------------------------------------------------------------- markdown


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*\S)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CATEGORY = re.compile(r"^\[([^\]]+)\]\s+")  # basic-memory observation: "- [decision] text #tag"
_HASHTAG = re.compile(r"(?:^|\s)#([A-Za-z][\w-]*)")
_WIKILINK = re.compile(r"\[\[([^\]]+)\]\]")
BASIC_MEMORY_SECTIONS = ("observations", "relations")


def parse_markdown(path: Path) -> list[Item]:
    """A markdown file, or every .md file under a folder: each bullet and each paragraph becomes
    a memory, prefixed with the heading it sits under ("Testing: run pytest with -x"). Tags come
    from the path (folders and file name, relative to the folder given), plus a basic-memory
    observation's [category] and #hashtags. Code blocks and YAML front matter are skipped."""
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.suffix.lower() in MARKDOWN_SUFFIXES
            and p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise EngramError(f"{path}: no markdown (.md) files in this folder")
        root = path
    else:
        files, root = [path], path.parent
    items: list[Item] = []
    for f in files:
        rel = f.relative_to(root)
        items.extend(_markdown_items(_read_text(f), _tags(*rel.parts[:-1], rel.stem), str(rel)))
    return items


def _markdown_items(text: str, path_tags: tuple[str, ...], rel: str) -> list[Item]:  # noqa: C901 - one pass over markdown lines, a branch per construct
    lines = text.splitlines()
    title = ""
    if lines and lines[0].strip() == "---":  # YAML front matter (basic-memory, many note tools)
        end = next((i for i, x in enumerate(lines[1:], 1) if x.strip() in ("---", "...")), None)
        if end is not None:
            title = next((x.split(":", 1)[1].strip().strip("'\"") for x in lines[1:end] if x.startswith("title:")), "")
            lines = lines[end + 1 :]
    items: list[Item] = []
    heading = ""
    section = ""  # a basic-memory note's "Observations" or "Relations", under its title
    para: list[str] = []
    fenced = False

    def add(text: str) -> None:
        text = _WIKILINK.sub(r"\1", text)
        if section == "relations":  # "- implements [[Long-term memory]]": the note is the subject
            items.append(
                Item(
                    f"{heading} {text.strip()}", _tags(*path_tags, "relation"), origin={"file": rel, "heading": heading}
                )
            )
            return
        extra: list[str] = []
        m = _CATEGORY.match(text)
        if m:
            extra.append(m.group(1))
            text = text[m.end() :]
        hashtags = _HASHTAG.findall(text)
        if hashtags:
            extra += hashtags
            text = _HASHTAG.sub("", text)
        text = text.strip()
        if text:
            content = f"{heading}: {text}" if heading else text
            items.append(Item(content, _tags(*path_tags, *extra), origin={"file": rel, "heading": heading}))

    def flush() -> None:
        if para:
            add(" ".join(x.strip() for x in para))
            para.clear()

    for line in lines:
        if _FENCE.match(line):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        h = _HEADING.match(line)
        if h:
            flush()
            text = h.group(2).strip()
            title = title or (text if len(h.group(1)) == 1 else "")
            section = text.lower() if text.lower() in BASIC_MEMORY_SECTIONS and title else ""
            heading = title if section else text
            continue
        b = _BULLET.match(line)
        if b:
            flush()
            add(b.group(1))
        elif not line.strip() or line.lstrip().startswith(("<!--", "|")):
            flush()  # a blank line ends a paragraph; tables and HTML comments are not memories
        elif line.startswith(("  ", "\t")) and items and not para:
            # A bullet's continuation line: part of that bullet.
            last = items[-1]
            items[-1] = Item(f"{last.content} {line.strip()}", last.tags, last.memory_type, last.origin)
        else:
            para.append(line)
    flush()
    return items


# ---------------------------------------------------------------- shared


PARSERS = {"mcp-memory": parse_mcp_memory, "mem0": parse_mem0, "markdown": parse_markdown}


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise EngramError(f"cannot read {path}: {e.strerror or type(e).__name__}") from None
    except UnicodeDecodeError:
        raise EngramError(f"cannot read {path}: it is not UTF-8 text") from None


def _json(text: str, path: Path, no: int) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise EngramError(f"{path}: line {no} is not valid JSON ({e})") from None


def _field(r: dict, name: str, path: Path, no: int) -> str:
    v = r.get(name)
    if not isinstance(v, str) or not v.strip():
        raise EngramError(f"{path}: record {no}: {name!r} must be a non-empty string")
    return v.strip()


def _tags(*raw: str) -> tuple[str, ...]:
    """Lower-case tags without spaces, in order, each once."""
    out = (re.sub(r"\s+", "-", t.strip().lower()) for t in raw if t and t.strip())
    return tuple(dict.fromkeys(t for t in out if t))


def _ledger_key(source: str, user: str, content: str) -> str:
    digest = hashlib.sha256(json.dumps([source, user, content]).encode()).hexdigest()[:24]
    return f"{LEDGER_PREFIX}:{source}:{digest}"


def import_from(
    eng: Engram, source: str, path: str | Path, *, dry_run: bool = False, user_id: str | None = None
) -> dict:
    """Import `path` as `source` (one of SOURCES) for a user. Returns what was (or, with
    dry_run, would be) stored, item by item, with resolution's action and reason."""
    parse = PARSERS.get(source)
    if parse is None:
        raise EngramError(f"source must be one of {', '.join(SOURCES)}; got {source!r}")
    path = Path(path)
    if not path.exists():
        raise EngramError(f"cannot read {path}: No such file or directory")
    items = parse(path)
    user = eng.user_of(user_id)
    db = eng.store_db
    todo: list[tuple[Item, str]] = []
    seen: set[str] = set()
    skipped = 0
    for it in items:
        key = _ledger_key(source, user, it.content)
        if key in seen or db.get_meta(key) is not None:
            skipped += 1  # imported before (or twice in this file)
            continue
        seen.add(key)
        todo.append((it, key))
    results = []
    with eng.lock:
        try:
            with db.transaction():
                results = eng.store_many(
                    [
                        {
                            "content": it.content,
                            "memory_type": it.memory_type,
                            "tags": list(it.tags),
                            "user_id": user,
                            "metadata": {"imported_from": source, "origin": it.origin},
                        }
                        for it, _ in todo
                    ]
                )
                for (_, key), r in zip(todo, results):
                    db.set_meta(key, r.memory.id)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            eng.rebuild_indexes()  # the rows rolled back; the derived indexes must follow them
    actions: dict[str, int] = {}
    rows = []
    for (it, _), r in zip(todo, results):
        actions[r.action] = actions.get(r.action, 0) + 1
        rows.append(
            {
                "action": r.action,
                "content": it.content,
                "tags": list(it.tags),
                "memory_id": None if dry_run else r.memory.id,
                "target_id": r.previous.id if r.previous is not None and r.action != "new" else None,
                "reason": r.reason,
            }
        )
    return {
        "source": source,
        "path": str(path),
        "dry_run": dry_run,
        "found": len(items),
        "skipped": skipped,
        "stored": len(todo),
        "actions": actions,
        "items": rows,
    }
