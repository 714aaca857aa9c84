"""An answer that picks an option the agent offered, read as the decision it makes.

The agent ends a message with options ("| **A. At commit time** | Generate when ... |",
"**Option 1: `session/` package**", "### Option 2 — ...", "1. **Push to GitHub**", "- **Telegram**
(free bot API)") and the user answers "A.", "yes do option 1", "go with the second one", "1 and 3"
or "Telegram.". The answer alone says nothing a later session could use; with the message it
answers it is a decision: `picked_options("A.", message)` is
`["Decided (When should the summary be generated?): At commit time — Generate when ..."]`,
worded from the option's own text and the question it settles. No options found in the message,
or a prompt that is not a short pick ("A lot of tests fail", "B-tree", a numbered list of
instructions), gives [] (never "A." alone).

`prompt_statements` is the one entry capture uses: a pick's decisions, or else the prompt's own
convention sentences (engram.text.convention_sentences), each with how it holds. A pick is held as
a candidate: most options the agent offers are this task's next step ("Push to GitHub", "Stage and
commit"), not a rule of the project (benchmarks/RESULTS.md, issue 45).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from engram.text.convention_sentences import Statement, convention_statements

__all__ = ["Option", "offered_options", "picked_options", "prompt_statements"]

PICK_WORDS = 12  # a longer prompt says more than a pick (the rest is read as prose)
PICK_LINES = 2
OPTION_CHARS = 300  # of an option's text kept in its decision
QUESTION_CHARS = 160
QUESTION_LOOKBACK = 8  # lines above the options searched for the question they answer
OFFERED_CHARS = 8000  # of the agent's message read for its options: its end, where they are

_FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S)
_KEY = r"(?:\d{1,2}|[A-Ha-h])"
# "**A. At commit time (Recommended)**", "Option 1: `session/` package", "2) Foo", "(b) Bar".
_KEYED = re.compile(
    rf"^(?:(?:option|approach|choice|alternative)\s+(?P<k1>{_KEY})\b\s*(?:[:.)—–-]\s*)?"
    rf"|\(?(?P<k2>{_KEY})[.)]\s+|(?P<k3>\d{{1,2}}|[A-H])\s*(?:[:—–]|\s-)\s+|(?P<k4>{_KEY})$)",
    re.I,
)
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_BULLET = re.compile(r"^[-*•+]\s+(.*)$")
_BOLD_LEAD = re.compile(r"^\*\*(.+?)\*\*\s*[:—–-]?\s*(.*)$")
_TABLE_SEPARATOR = re.compile(r"^\|?[\s|:-]+\|?$")
_QUESTION_LEAD = re.compile(
    r"^(?:question\s+\d+(?:\s+of\s+\d+)?|(?:first|next|second|third|last|final|another|one more)\s+question)"
    r"\s*[:.—–-]\s*",
    re.I,
)
# A question that offers this task's next steps rather than a choice about the project.
_MENU = re.compile(
    r"\bwould you like(?: me)?(?: to)?\W*$|^(?:should|shall|can|may) (?:i|we)\b|\b(?:do you )?want me to\b|"
    r"\bwhat would you like(?: me)? to do\b|\bwhich option would you like\b|"
    r"\bhow (?:would you like to|should we|do you want to) proceed\b|\bnext (?:steps?|actions?)\b|\bready to\b",
    re.I,
)
_RECOMMENDED = re.compile(r"\(\s*recommended\s*\)|\s*✅\s*\*?\*?\s*best fit\*?\*?", re.I)


class Option(NamedTuple):
    key: str  # "A", "1"; "" for an item of a plain bullet list (picked by name or position)
    label: str  # its name ("At commit time"), or its whole text when it has no separate name
    detail: str  # what the message says of it beyond the name
    question: str  # the question or heading the options answer, "" when none is seen
    asks: bool  # the question asks how the project should be (not which next step to take)


def _plain(text: str) -> str:
    """Markdown emphasis and stray table bars removed, spaces collapsed."""
    text = re.sub(r"\*\*|__|(?<![\w*])\*(?![\s*])|(?<![\s*])\*(?![\w*])", "", text)
    return re.sub(r"\s+", " ", text.replace("|", " ")).strip(" -—–:")


def _split_key(text: str, plain: bool = True) -> tuple[str, str] | None:
    """("A", "At commit time") for "A. At commit time", "Option A: ...", "A"; None for no key.
    The rest keeps its markdown when not `plain` (a bold name after the key)."""
    t = _plain(text) if plain else text.strip()
    m = _KEYED.match(t)
    if not m:
        return None
    key = next(g for g in m.group("k1", "k2", "k3", "k4") if g)
    return key.upper(), t[m.end() :].strip()


def _items(message: str) -> list[tuple[int, str, str, str]]:
    """Every candidate option line of the message: (line number, key or "", label, detail)."""
    lines = message.splitlines()
    out: list[tuple[int, str, str, str]] = []
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("|") and line.count("|") >= 3:
            if _TABLE_SEPARATOR.match(line):
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            keyed = _split_key(cells[0])
            if keyed:  # a table's rows are options only when they carry a key ("A", "**B. Foo**")
                detail = _plain(cells[1]) if len(cells) > 1 else ""
                out.append((i, keyed[0], keyed[1] or detail, detail if keyed[1] else ""))
            continue
        heading = _HEADING.match(line)
        if heading:
            keyed = _split_key(heading.group(1))
            if keyed and re.match(r"\W*(?:option|approach|choice|alternative)\b", heading.group(1), re.I):
                out.append((i, keyed[0], keyed[1], ""))
            continue
        bullet = _BULLET.match(line)
        body = bullet.group(1) if bullet else line
        keyed = _split_key(body.split("**", 2)[1]) if body.startswith("**") and body.count("**") >= 2 else None
        if keyed and raw[:1] not in " \t":  # "**1. Subagent-Driven** - I dispatch ...", "**Option 1: x**"
            after = _plain(body.split("**", 2)[2])
            label = keyed[1] or after
            out.append((i, keyed[0], label, after if keyed[1] else ""))
            continue
        keyed = _split_key(body, plain=False) if not bullet else None
        if keyed and keyed[1] and raw[:1] not in " \t":  # "1. Mark existing work as complete"
            lead = _BOLD_LEAD.match(keyed[1])
            label, detail = (_plain(lead.group(1)), _plain(lead.group(2))) if lead else (_plain(keyed[1]), "")
            out.append((i, keyed[0], label, detail))
            continue
        lead = _BOLD_LEAD.match(bullet.group(1)) if bullet and raw[:1] not in " \t" else None
        if lead:  # "- **Telegram** (easier to set up with a free bot API)"
            out.append((i, "", _plain(lead.group(1)), _plain(lead.group(2))))
    return out


def _successor(a: str, b: str) -> bool:
    if a.isdigit() and b.isdigit():
        return int(b) == int(a) + 1
    return len(a) == len(b) == 1 and a.isalpha() and ord(b) == ord(a) + 1


def _first(key: str) -> bool:
    return key in ("1", "A")


def _question(lines: list[str], start: int) -> tuple[str, bool]:
    """The question the options starting at line `start` answer, and whether it asks how the
    project should be (a question or a heading, not a menu of next steps): the nearest heading,
    or line ending in "?" or ":", above them, its last sentence; ("", False) when it is too short
    to say anything ("Options:", "Should we:", "Your Options")."""
    for line in reversed(lines[max(0, start - QUESTION_LOOKBACK) : start]):
        raw = line.strip()
        heading = _HEADING.match(raw)
        if raw.startswith("|") or not (heading or raw.rstrip("* ").endswith(("?", ":"))):
            continue
        text = re.split(r"(?<=[.!?])\s+(?=\S)", _plain(heading.group(1) if heading else raw))[-1]
        text = _QUESTION_LEAD.sub("", re.sub(r"^[^\w`(]+", "", text)).rstrip(":").strip()
        if len(text.split()) < 3:
            return "", False
        asks = (bool(heading) or text.endswith("?")) and not _MENU.search(text)
        return text[:QUESTION_CHARS], asks
    return "", False


def offered_options(message: str) -> list[Option]:
    """The options the agent's message ends with, in order: the last run of keyed items (A, B, C
    or 1, 2, 3 in sequence: a table's rows, a list, "Option N" headings or bold leads), else its
    last bullet list whose items start with a bold name; [] when it offers none."""
    if not isinstance(message, str):
        raise TypeError(f"message must be a string, got {type(message).__name__}")
    text = _FENCE.sub("\n", message[-OFFERED_CHARS:])
    lines = text.splitlines()
    items = _items(text)
    groups: list[list[tuple[int, str, str, str]]] = []
    for item in items:
        last = groups[-1][-1] if groups else None
        if last is not None and (
            (item[1] and last[1] and _successor(last[1], item[1]))
            or (not item[1] and not last[1] and item[0] - last[0] <= 2)
        ):
            groups[-1].append(item)
        elif not item[1] or _first(item[1]):
            groups.append([item])
    groups = [g for g in groups if len(g) >= 2]
    keyed = [g for g in groups if g[0][1]]
    chosen = keyed[-1] if keyed else (groups[-1] if groups else [])
    if not chosen:
        return []
    question, asks = _question(lines, chosen[0][0])
    out = []
    for n, (i, key, label, detail) in enumerate(chosen):
        end = chosen[n + 1][0] if n + 1 < len(chosen) else len(lines)
        if not _RECOMMENDED.sub("", detail).strip():  # the lines under an "Option N" line, to a blank line
            body = []
            for raw in lines[i + 1 : end]:
                if not raw.strip() or _HEADING.match(raw.strip()) or raw.strip() == "---":
                    break
                body.append(_plain(_BULLET.sub(r"\1", raw.strip())))
            detail = "; ".join(b for b in body if b and not b.endswith(":"))
        out.append(Option(key, label, detail, question, asks))
    return out


# -- what the user's answer picks
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "1st": 0, "2nd": 1, "3rd": 2, "4th": 3}
_FILLER = re.compile(
    r"\b(?:yes|yeah|yep|yup|ok(?:ay)?|sure|sounds good|great|perfect|fine|good|cool|alright|please|pls|thanks|"
    r"let'?s|lets|we'?ll|i'?ll|i|we|go(?:ing)? with|went with|do|pick|picking|choose|chose|take|tackle|"
    r"start with|prefer|vote for|want|use|option|options|approach|choice|number|no\.?|is|are|works|the|one|ones|"
    r"and|or|then|to|with|for me|both|implement|apply)\b|[,.;:!&+/()#-]",
    re.I,
)
_KEY_LIST = rf"{_KEY}(?:\s*(?:,|&|\+|and|or|/)\s*{_KEY})*"
_VERB = (
    r"(?:go(?:ing)? with|went with|pick|choose|take|tackle|start with|prefer|vote for|let'?s do|do|use|"
    r"implement|apply|i'?ll (?:go with|take))"
)
# "2 please", "A is fine": words after a key that agree (not "A lot", "B is broken").
_AGREEING = (
    r"\s+(?:please|pls|thanks|then|too|now|(?:is|sounds|looks|seems) (?:fine|good|great|ok(?:ay)?|right)|works)\b"
)
_AFTER_KEY = r"(?=\s*(?:$|[.,;:!)]|\s(?:please|then|for|is|and|but|too|now)\b))"
# The key, or keys, a short answer names: "option 2", "go with B", "A.", "1 and 3", "A. is fine".
_PICK_PATTERNS = (
    re.compile(rf"\boptions?\s+#?(?P<keys>{_KEY_LIST})(?![\w-])", re.I),
    re.compile(rf"\b{_VERB}\s+(?:option\s+)?#?(?P<keys>{_KEY_LIST}){_AFTER_KEY}", re.I),
    re.compile(rf"^\(?(?P<keys>{_KEY_LIST})\)?(?=\s*(?:$|[.,;:!)]\s|[.!]?$)|{_AGREEING})", re.I),
)
_NUMBER_AND_NAME = re.compile(r"^(?P<keys>\d{1,2})\s+(?=[a-z])", re.I)  # "2 import GPG key"
_ORDINAL_PICK = re.compile(
    rf"\b(?:the\s+)?(?P<ord>{'|'.join(_ORDINALS)}|last)(?:\s+(?:one|option|approach|choice))?\b", re.I
)
_LIST_PROMPT = re.compile(r"^\s*(?:\d{1,2}|[a-hA-H])[.)]\s", re.M)  # a numbered list the user wrote
_AGREED = re.compile(
    r"^(?:[\s,.;:!)—–-]|\b(?:is|are|sounds|looks|seems) (?:fine|good|great|ok(?:ay)?|right)\b|\bworks\b|"
    r"\b(?:but|and|then|also|please|pls)\b)+",
    re.I,
)


def _keys(raw: str) -> list[str]:
    return [k.upper() for k in re.findall(rf"(?<!\w){_KEY}(?!\w)", raw, flags=re.I)]


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'’`./-]+", text.casefold())


def _option_words(o: Option) -> set[str]:
    return set(_words(f"{o.label} {o.detail}"))


def _pick(answer: str, options: list[Option]) -> tuple[list[Option], int]:
    """The options the answer picks (by key, position or name) and where its reference to them
    ends; ([], 0) when it picks none."""
    by_key = {o.key: o for o in options if o.key}
    for pattern in _PICK_PATTERNS:
        m = pattern.search(answer)
        if m:
            keys = list(dict.fromkeys(_keys(m.group("keys"))))
            picked = [by_key[k] for k in keys if k in by_key]
            return (picked, m.end()) if len(picked) == len(keys) else ([], 0)
    m = _NUMBER_AND_NAME.match(answer)
    if m:  # only when the words after the number are that option's own
        o = by_key.get(m.group("keys"))
        ok = o is not None and set(_words(answer[m.end() :])) <= _option_words(o)
        return ([o], len(answer)) if ok and o is not None else ([], 0)
    m = _ORDINAL_PICK.search(answer)
    if m and len(_FILLER.sub(" ", answer[: m.start()] + answer[m.end() :]).split()) <= 1:
        n = _ORDINALS.get(m.group("ord").lower(), len(options) - 1)
        return ([options[n]], m.end()) if n < len(options) else ([], 0)
    said = " ".join(_words(_FILLER.sub(" ", answer)))
    for o in options:  # "Telegram.", "smart extraction": the option's name, said alone
        name = " ".join(_words(re.split(r"\s[(—–-]|:", o.label)[0]))
        if said and name == said:
            return [o], len(answer)
    return [], 0


def _rest(after: str, picked: list[Option]) -> str:
    """What the answer adds after its pick ("A. is fine, ensure we log": "Ensure we log"); ""
    when that is only agreement or the option's own words."""
    rest = _AGREED.sub("", after).strip(" ,.;:!")
    words = _FILLER.sub(" ", rest).split()
    if len(words) < 2 or set(_words(" ".join(words))) <= set().union(*map(_option_words, picked)):
        return ""
    return rest[:1].upper() + rest[1:]


def _decision(o: Option, rest: str) -> str:
    name, detail = _RECOMMENDED.sub("", o.label).strip(" ?"), _RECOMMENDED.sub("", o.detail).strip(" ?")
    sep = " " if detail.startswith("(") else " — "  # "Push to GitHub (`git push`)" reads as one
    text = f"{name}{sep}{detail}" if detail and detail != name else name
    if len(text) > OPTION_CHARS:
        text = text[:OPTION_CHARS].rsplit(" ", 1)[0] + " …"
    said = f"Decided ({o.question}): {text}" if o.question else f"Decided: {text}"
    return f"{said.rstrip('. ')}. {rest.rstrip('.')}." if rest else said


def picked_options(prompt: str, offered: str) -> list[Statement]:
    """The decisions a short answer makes by picking among the options the agent's message
    `offered` ends with, each worded from the option's text and the question it answers, and
    standing when that question asks how the project should be (a candidate when it offers the
    next steps, or when none is seen); [] when the prompt is not such a pick or the message
    offers no options."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
    answer = prompt.strip()
    if (
        not answer
        or len(answer.split()) > PICK_WORDS
        or len(answer.splitlines()) > PICK_LINES
        or len(_LIST_PROMPT.findall(answer)) >= 2
    ):
        return []
    options = offered_options(offered)
    picked, end = _pick(answer, options) if options else ([], 0)
    rest = _rest(answer[end:], picked) if picked else ""
    return [Statement(_decision(o, rest), o.asks) for o in picked]


def prompt_statements(prompt: str, offered: str = "") -> list[Statement]:
    """What a user's prompt states for the project, given the agent's message it answers
    (`offered`, "" when unknown): the decisions of a pick among that message's options
    (picked_options), or else its convention sentences."""
    return (picked_options(prompt, offered) if offered else []) or convention_statements(prompt)
