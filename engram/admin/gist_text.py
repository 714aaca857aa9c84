"""The text of a gist (docs/lifecycle.md#gists): what a captured memory says that a gist may repeat,
when two say the same thing, the gist's lines and header composed from its members, and the check
that every line is its sources' (trace). Pure functions of the texts: engram.admin.gists plans and
writes gists with them."""

from __future__ import annotations

import math
import re
from typing import Any

from engram.core.redaction import REDACTED
from engram.core.types import Memory
from engram.text.statements import sentences
from engram.text.tokens import tokenize

MAX_LINES = 12
MAX_REQUESTS = 4  # of an episodes' gist's lines, the questions it answers (each ~10 tokens)
MAX_LINE_CHARS = 400
HEADER = re.compile(r"\AGist of (\d+) (\w+) in (\d+) sessions?, (\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2}):\Z")
LINE = re.compile(r"\A- (.+) \((\d+) of (\d+)\)\Z")
_CODE = re.compile(r"`([^`\n]{3,300})`")
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|js|ts|tsx|go|rs|rb|java|toml|yaml|yml|json|md|sql|sh|cfg|ini))(?::\d+)?\b"
)


def units_of(text: str) -> list[str]:
    """What a member says that a gist may repeat, each a verbatim piece of `text`: its sentences
    of at least three content words, the commands in backticks and the file paths it names; none
    with a redacted secret."""
    out: list[str] = []
    for line in text.splitlines():
        # A turn's answer is labelled "Assistant:" (engram.workflows.capture): the sentence is the rest.
        out += [p.strip().removeprefix("Assistant:").strip() for p in sentences(line) if len(tokenize(p)) >= 3]
    out += [m.group(1).strip() for m in _CODE.finditer(text)]
    out += [m.group(0) for m in _PATH.finditer(text)]
    return [u for u in dict.fromkeys(out) if 3 <= len(u) <= MAX_LINE_CHARS and REDACTED not in u and u in text]


def request_of(m: Memory) -> str | None:
    """An episode's request as a unit (its first sentence, "User: ..."): what the gist was asked."""
    first = units_of(m.content.splitlines()[0]) if m.content.strip() else []
    return first[0] if first and first[0].startswith("User:") else None


def unit_key(unit: str) -> tuple[str, ...] | str:
    """Two members say the same thing when their units have the same content words in order (a
    sentence), or the same text (a command, a path: every character matters)."""
    words = tuple(tokenize(unit))
    return words if len(words) >= 3 else " ".join(unit.split())


def compose(
    members: list[Memory], carried: list[dict], kind: str, sessions: set[str], span: tuple[str, str], total: int
) -> dict:
    """The gist's lines and text: the units of `members` (and of `carried` lines, whose sources no
    longer stored still count) that half the sources or more say (two at least), the most said
    first; for episodes, below them, the requests its members were asked (what the gist answers:
    up to MAX_REQUESTS, the most asked first), and no line at all when they share no answer.
    `total`: the gist's sources, stored or not. Returns {content, lines}."""
    live = {m.id for m in members}
    found: dict[Any, dict] = {}
    for m in sorted(members, key=lambda m: (m.created_at, m.id)):
        for u in units_of(m.content):
            entry = found.setdefault(unit_key(u), {"text": u, "sources": []})
            if m.id not in entry["sources"]:
                entry["sources"].append(m.id)
    for line in carried:
        entry = found.setdefault(unit_key(line["text"]), {"text": line["text"], "sources": []})
        entry["sources"] += [i for i in line["sources"] if i not in live and i not in entry["sources"]]
    # What most members do not say is not what they share: a line needs half of them (two at least).
    shared = [e for e in found.values() if len(e["sources"]) >= max(2, math.ceil(total / 2))]
    shared.sort(key=lambda e: -len(e["sources"]))  # a stable sort: the earlier said first among equals
    if kind == "episode":
        # What it answers: the questions its members were asked, each as one of them asked it,
        # so a new phrasing finds the gist by the words of any earlier one, not only the first's.
        # A gist of questions alone, with no answer they share, states nothing.
        answers = [e for e in shared if not e["text"].startswith("User:")]
        asked = [line["text"] for line in carried if line["text"].startswith("User:")]
        asked += [r for m in sorted(members, key=lambda m: (m.created_at, m.id)) for r in [request_of(m)] if r]
        entries = list({id(found[unit_key(q)]): found[unit_key(q)] for q in asked}.values())
        entries.sort(key=lambda e: -len(e["sources"]))  # the most asked first, the earlier among equals
        # The answers first: a block that cuts a long gist short (the prompt hook's) keeps them.
        asked_lines = entries[:MAX_REQUESTS]
        shared = answers[: MAX_LINES - len(asked_lines)] + asked_lines if answers else []
    lines: list[dict] = []
    for e in shared:
        if any(e["text"] in kept["text"] for kept in lines):
            continue  # a path or command inside a sentence already kept
        lines.append({"text": e["text"], "sources": e["sources"]})
        if len(lines) == MAX_LINES:
            break
    noun = {"episode": "episodes", "failure": "failures", "handoff": "handoffs"}[kind]
    plural = "s" if len(sessions) != 1 else ""
    head = f"Gist of {total} {noun} in {len(sessions)} session{plural}, {span[0]}..{span[1]}:"
    body = [f"- {x['text']} ({len(x['sources'])} of {total})" for x in lines]
    return {"content": "\n".join([head, *body]), "lines": lines}


def trace(content: str, meta: dict, source_text: dict[str, str]) -> list[str]:
    """What in a gist cannot be traced to its sources (empty: every line can): each line of its
    extractive text (its content unless a command rewrote it) must be
    the verbatim text of a unit said by each source it names (as `source_text` has them: the ids
    of sources no longer stored are skipped), its count theirs, its header the metadata's."""
    problems = []
    # A gist ENGRAM_GIST_COMMAND rewrote is checked by the extractive text it was given.
    head, *body = meta.get("extractive", content).splitlines()
    h = HEADER.match(head)
    if h is None or int(h.group(1)) != len(meta["sources"]) or int(h.group(3)) != len(meta["sessions"]):
        problems.append(f"header {head!r} does not count the gist's sources and sessions")
    if len(body) != len(meta["lines"]):
        problems.append("the lines are not the metadata's")
    for text, line in zip(body, meta["lines"]):
        m = LINE.match(text)
        if (
            m is None
            or m.group(1) != line["text"]
            or int(m.group(2)) != len(line["sources"])
            or int(m.group(3)) != len(meta["sources"])
        ):
            problems.append(f"line {text!r} is not its metadata's")
            continue
        key = unit_key(line["text"])
        for sid in line["sources"]:
            src = source_text.get(sid)
            if src is not None and not any(unit_key(u) == key for u in units_of(src)):
                problems.append(f"line {text!r}: source {sid} does not say it")
        stored = [source_text[sid] for sid in line["sources"] if sid in source_text]
        if stored and not any(line["text"] in src for src in stored):
            problems.append(f"line {text!r} is in none of its sources verbatim")
    return problems
