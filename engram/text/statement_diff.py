"""What changed from one statement to another, judged from the text alone (no similarity)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from engram.text.statements import (
    ANTONYMS,
    BE_HAVE,
    CALENDAR,
    LIGHT_VERBS,
    NEG_PREFIXES,
    NEGATING_MARKERS,
    SET_VALUED,
    Parsed,
    Token,
    parse_statement,
)
from engram.text.tokens import stem

__all__ = ["Comparison", "compare", "compare_detail", "covers", "is_contradiction"]


@dataclass(frozen=True)
class Comparison:
    """What changed from old to new, judged from the text alone.

    `basis` names the evidence, so the caller can weigh it against similarity:
    identical, subset, reworded, loose, disjoint (same/unrelated, weak);
    subject-swap, subject-qualifier, other-fact (unrelated: a different subject or predicate);
    old-value (unrelated: new ends a state old does not state, old states another: old news);
    marker, negation, antonym, value, slot (contradiction);
    additive, set-valued, elaboration (addition);
    compound (unrelated: text of several sentences that is not near-identical).
    """

    relation: str
    reason: str
    basis: str
    overlap: float  # shared content words / content words of the longer text
    new_values: tuple[str, ...] = ()  # values (numbers, identifiers, names) only the new text has


@dataclass(frozen=True)
class _Region:
    op: str  # replace | insert | delete
    old: tuple[Token, ...]
    new: tuple[Token, ...]
    where: str  # subject | head | object | mixed
    old_subject: tuple[Token, ...] = ()  # the part of each side inside its subject phrase
    new_subject: tuple[Token, ...] = ()


def _where(p: Parsed, idxs: Sequence[int]) -> set[str]:
    out = set()
    for i in idxs:
        if i < p.verb:
            out.add("subject")
        elif i == p.head or i == p.verb:
            out.add("head")
        else:
            out.add("object")
    return out


def _regions(a: Parsed, b: Parsed) -> tuple[list[_Region], int]:
    ca, cb = a.content(), b.content()
    sm = SequenceMatcher(None, [t.stem for _, t in ca], [t.stem for _, t in cb], autojunk=False)
    regions, shared = [], 0
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            shared += i2 - i1
            continue
        wa = _where(a, [i for i, _ in ca[i1:i2]])
        wb = _where(b, [j for j, _ in cb[j1:j2]])
        places = wa | wb
        if places == {"subject"}:
            where = "subject"
        elif "head" in places:
            where = "head"
        elif places == {"object"}:
            where = "object"
        else:
            where = "mixed"
        regions.append(
            _Region(
                op,
                tuple(t for _, t in ca[i1:i2]),
                tuple(t for _, t in cb[j1:j2]),
                where,
                tuple(t for i, t in ca[i1:i2] if i < a.verb),
                tuple(t for j, t in cb[j1:j2] if j < b.verb),
            )
        )
    return regions, shared


def _words(tokens: Sequence[Token]) -> str:
    return " ".join(t.text for t in tokens) or "(nothing)"


def _stem_words(p: Parsed, stems: set[str]) -> str:
    """The words of p whose stems are in `stems`, in text order."""
    return _words([t for _, t in p.content() if t.stem in stems])


def _negated_pair(x: Token, y: Token) -> bool:
    """True when one word is the other with a negating prefix (likes / dislikes)."""
    for a, b in ((x, y), (y, x)):
        for pre in NEG_PREFIXES:
            stripped = a.low[len(pre) :]
            if a.low.startswith(pre) and len(stripped) >= 3 and stem(stripped) == b.stem:
                return True
    return False


def _value_kind(tokens: Sequence[Token]) -> str:
    if any(t.kind == "num" for t in tokens):
        return "number"
    if any(t.low in CALENDAR for t in tokens):
        return "date"
    if any(t.kind == "ident" for t in tokens):
        return "value"
    if any(t.kind == "proper" for t in tokens):
        return "name"
    return "value"


def _set_valued(a: Parsed, prefix_stems: Sequence[str]) -> bool:
    """Is the changed slot the object of a many-valued predicate ("speaks", "allergic to")?"""
    verb = a.tokens[a.verb].low if a.verb < len(a.tokens) else ""
    near = set(prefix_stems[-2:]) | {verb}
    return bool(near & SET_VALUED)


def compare_detail(old: str, new: str) -> Comparison:
    """Classify how `new` relates to `old`, with the evidence (see Comparison.basis).

    The word-order diff (_diff) reads one statement against another slot by slot; a restatement
    that moves, abbreviates or re-voices the same words defeats it, so two readings of the
    whole sentence come first and last: the same words with two arguments exchanged are another
    fact (roles-swapped), and a text that only says again what the old one says is the same
    (restated), whatever the slot-by-slot diff made of it.
    """
    a, b = parse_statement(old), parse_statement(new)
    c = _diff(old, new)
    if c.basis == "disjoint":
        return c
    if _swapped(a, b) and {t.stem for t in _bag(a)} == {t.stem for t in _bag(b)}:
        return Comparison(
            "unrelated", "the same words with two parts exchanged", "roles-swapped", c.overlap, c.new_values
        )
    if c.relation == "same" and c.basis != "reworded":
        return c
    # "reworded" allows one new word; a line of a merged memory needs the stricter reading.
    why = _restates(a, b)
    if why:
        return Comparison("same", why, "restated", c.overlap, c.new_values)
    return c


def _diff(old: str, new: str) -> Comparison:  # noqa: C901 - resolution's decision table, read as a whole in one place
    """The slot-by-slot reading: what `new` changes in `old`, region by region of the word diff."""
    a, b = parse_statement(old), parse_statement(new)
    regions, shared = _regions(a, b)
    n_old, n_new = len(a.content()), len(b.content())
    overlap = shared / max(n_old, n_new, 1)
    stems_old = {t.stem for _, t in a.content()}
    stems_new = {t.stem for _, t in b.content()}
    new_values = tuple(dict.fromkeys(t.text for _, t in b.content() if t.value and t.stem not in stems_old))

    def out(relation: str, reason: str, basis: str) -> Comparison:
        return Comparison(relation, reason, basis, overlap, new_values)

    # Negation flips hidden in word pairs: "doesn't like" vs "dislikes".
    neg_old, neg_new = a.negations, b.negations
    kept: list[_Region] = []
    for r in regions:
        if r.op == "replace" and len(r.old) == 1 and len(r.new) == 1 and _negated_pair(r.old[0], r.new[0]):
            if len(r.old[0].low) > len(r.new[0].low):
                neg_old += 1
            else:
                neg_new += 1
            continue
        kept.append(r)
    regions = kept
    flipped = (neg_old % 2) != (neg_new % 2)

    if shared == 0:
        return out("unrelated", "no content words in common", "disjoint")

    # A subject word only tells subjects apart when the other text lacks it altogether;
    # otherwise the sentence was just reordered ("X uses Y" / "Y is X's ...").

    def absent(r: _Region) -> bool:
        return any(t.stem not in stems_new for t in r.old_subject) or any(
            t.stem not in stems_old for t in r.new_subject
        )

    # "The user no longer lives in Hanoi." against "The user moved to Saigon.": the new text
    # ends a value the old one does not state, while the old one states another (or the old
    # one itself records the move away). It is old news about a value already left behind and
    # must not replace the newer fact.
    if set(b.change_markers) <= NEGATING_MARKERS and (b.change_markers or neg_new > neg_old):
        vals_old = {t.stem for _, t in a.content() if t.value}
        vals_new = {t.stem for _, t in b.content() if t.value}
        others = vals_old - vals_new
        if others and ((vals_new and not vals_new & vals_old) or a.change_markers):
            return out(
                "unrelated",
                f"ends {_stem_words(b, vals_new) if vals_new else 'a state'} while the "
                f"old memory states {_stem_words(a, others)}",
                "old-value",
            )

    swaps = [r for r in regions if r.old_subject and r.new_subject and absent(r)]
    if swaps:
        r = swaps[0]
        return out(
            "unrelated",
            f"different subject: {_words(r.old_subject)} -> {_words(r.new_subject)}",
            "subject-swap",
        )
    qualifiers = [r for r in regions if r.where == "subject" and absent(r)]
    shared_values = {t.stem for _, t in a.content() if t.value} & {t.stem for _, t in b.content() if t.value}
    if qualifiers and b.change_markers and shared_values:
        # "The user's preferred IDE is PyCharm" / "The user switched from PyCharm to Cursor":
        # the subject is worded differently but the change names the old value.
        return out("contradiction", f"change marker: {b.change_markers[0]}", "marker")
    if qualifiers:
        r = qualifiers[0]
        what = f"+{_words(r.new)}" if r.op == "insert" else f"-{_words(r.old)}"
        return out("unrelated", f"subject qualified differently: {what}", "subject-qualifier")

    if b.change_markers and (regions or flipped or set(b.change_markers) & NEGATING_MARKERS):
        return out("contradiction", f"change marker: {b.change_markers[0]}", "marker")
    if flipped and overlap >= 0.5:
        return out("contradiction", "negation removed" if neg_old > neg_new else "negation added", "negation")

    replaces = [r for r in regions if r.op == "replace"]
    for r in replaces:
        if len(r.old) == 1 and len(r.new) == 1 and frozenset((r.old[0].stem, r.new[0].stem)) in ANTONYMS:
            return out("contradiction", f"opposite value: {r.old[0].text} -> {r.new[0].text}", "antonym")

    novel = [t for r in regions for t in r.new]
    if b.additive_markers and novel:
        return out("addition", f"additive: {b.additive_markers[0]}", "additive")

    if len(replaces) == 1:
        r = _without_verbs(a, b, replaces[0])
        prefix = _shared_prefix_stems(a, r)
        small = len(r.old) <= 3 and len(r.new) <= 3
        # A word that also appears elsewhere in the other text was moved, not changed.
        moved = any(t.stem in stems_new for t in r.old) or any(t.stem in stems_old for t in r.new)
        has_value = any(t.value for t in r.old + r.new)
        if r.old and r.new and not moved and r.where != "head" and small and (has_value or r.where == "object"):
            numeric = any(t.kind == "num" for t in r.old + r.new)
            if not numeric and _set_valued(a, prefix):
                return out("addition", f"another value of a many-valued fact: {_words(r.new)}", "set-valued")
            kind = _value_kind(r.old + r.new)
            return out(
                "contradiction",
                f"{kind} changed: {_words(r.old)} -> {_words(r.new)}",
                "value" if has_value else "slot",
            )

    if b.now_marker and not a.now_marker and regions:
        return out("contradiction", f"changed now: {_words(novel) if novel else 'less'}", "marker")
    if not regions:
        return out("same", "same content words", "identical")
    if all(r.op == "delete" for r in regions):
        return out("same", "old already says this and more", "subset")
    if all(r.op == "insert" for r in regions):
        return out("addition", f"adds detail: {_words(novel)}", "elaboration")
    if all(r.where == "head" and _only_verb_changed(a, b, r) for r in regions) and not any(t.value for t in novel):
        return out("same", "reworded predicate", "reworded")
    new_info = {t.stem for t in novel} - stems_old
    if len(new_info) <= 1 and not any(t.value for t in novel if t.stem in new_info):
        return out("same", "reworded, no new information", "reworded")
    head_changes = [r for r in regions if r.where == "head" and r.op == "replace"]
    if head_changes:
        # Same subject, another predicate: a separate fact, not more detail on this one.
        r = head_changes[0]
        return out("unrelated", f"different predicate: {_words(r.old)} -> {_words(r.new)}", "other-fact")
    return out("unrelated", f"partly different: {_words(novel)}", "loose")


def _without_verbs(a: Parsed, b: Parsed, r: _Region) -> _Region:
    """ "has 4 replicas" -> "was scaled to 8 replicas": judge the change without the verbs."""
    if r.where != "head" or r.old_subject or r.new_subject:
        return r
    head_a = a.tokens[a.head] if a.head < len(a.tokens) else None
    head_b = b.tokens[b.head] if b.head < len(b.tokens) else None
    old = tuple(t for t in r.old if t is not head_a)
    new = tuple(t for t in r.new if t is not head_b)
    if not old or not new or (len(old) < len(r.old)) == (len(new) < len(r.new)):
        return r  # both verbs changed too: another predicate, not a new value
    return _Region(r.op, old, new, "object", r.old_subject, r.new_subject)


def _only_verb_changed(a: Parsed, b: Parsed, r: _Region) -> bool:
    """ "lives" -> "is based": at most one side changed anything besides its verb."""
    head_a = a.tokens[a.head] if a.head < len(a.tokens) else None
    head_b = b.tokens[b.head] if b.head < len(b.tokens) else None
    extra_old = [t for t in r.old if t is not head_a]
    extra_new = [t for t in r.new if t is not head_b]
    return not (extra_old and extra_new)


def _shared_prefix_stems(a: Parsed, region: _Region) -> list[str]:
    """Content stems of old that come before the region (the shared context to its left)."""
    stems = [t.stem for _, t in a.content()]
    if region.old:
        first = region.old[0]
        for k, (_, t) in enumerate(a.content()):
            if t is first:
                return stems[:k]
    return stems


def compare(old: str, new: str) -> tuple[str, str]:
    """-> (relation, reason): relation in {"same", "contradiction", "addition", "unrelated"}; text-only."""
    c = compare_detail(old, new)
    return c.relation, c.reason


def is_contradiction(old: str, new: str) -> bool:
    """True when `new` changes a value, negates or explicitly updates what `old` says."""
    return compare_detail(old, new).relation == "contradiction"


# --- restatements ---------------------------------------------------------------------------------


def _bag(p: Parsed) -> list[Token]:
    """Content words without the light verbs ("happens", "gets") and "take place"."""
    out = []
    content = p.content()
    for k, (_, t) in enumerate(content):
        if t.stem in LIGHT_VERBS:
            continue
        nxt = content[k + 1][1].stem if k + 1 < len(content) else ""
        prev = content[k - 1][1].stem if k else ""
        if (t.stem == "take" and nxt == "place") or (t.stem == "place" and prev == "take"):
            continue
        out.append(t)
    return out


def _same_stem(x: str, y: str) -> bool:
    """One word, or one word in two derived forms the stemmer leaves apart (allergic / allergy)."""
    if x == y:
        return True
    short, long = sorted((x, y), key=len)
    return len(short) >= 5 and long.startswith(short) and len(long) - len(short) <= 2


def _verb_and_head(p: Parsed) -> tuple[int, int]:
    """The main verb and predicate head, but a light verb later on is the verb: in "Staging
    deploys happen on merge" the word that looks like a verb ("deploys") is in the subject."""
    light = next((i for i, t in p.content() if i > p.verb and t.stem in LIGHT_VERBS), None)
    return (light, light) if light is not None else (p.verb, p.head)


def _sides(p: Parsed) -> tuple[set[str], set[str]]:
    """Content stems before the main verb (the subject side) and after it."""
    verb, head = _verb_and_head(p)
    before = {t.stem for i, t in p.content() if i < verb}
    after = {t.stem for i, t in p.content() if i > verb and i != head}
    return before, after


def _swapped(a: Parsed, b: Parsed) -> bool:
    """The same predicate with an argument moved to each other's side: "Alice reviews Bob's PRs" /
    "Bob reviews Alice's PRs". A passive ("... by Alice") or a copula ("X is Y") moves its
    arguments without changing the fact, so neither counts."""
    (_, head_a), (_, head_b) = _verb_and_head(a), _verb_and_head(b)
    if head_a >= len(a.tokens) or head_b >= len(b.tokens):
        return False
    ha, hb = a.tokens[head_a], b.tokens[head_b]
    if not _same_stem(ha.stem, hb.stem) or ha.low in BE_HAVE or hb.low in BE_HAVE:
        return False
    if ("by" in {t.low for t in a.tokens}) != ("by" in {t.low for t in b.tokens}):
        return False
    sa, oa = _sides(a)
    sb, ob = _sides(b)
    return bool((sa & ob) - sb) and bool((oa & sb) - sa)


def _neighbours(bag: Sequence[Token], stem: str) -> set[str]:
    return {bag[k + d].stem for k, t in enumerate(bag) if t.stem == stem for d in (-1, 1) if 0 <= k + d < len(bag)}


def _restates(a: Parsed, b: Parsed) -> str | None:
    """Why `b` says again what `a` says and nothing more, or None.

    Every content word of b is one of a's (short forms read long, light verbs aside); no change
    or additive marker a lacks; the same polarity; each value next to a word it is next to in a
    (so "timeout 30 s, retries 5" is not restated by "timeout 5 s"); no word of a's subject
    after a possessive dropped ("the user's sister" is not "the user"); no arguments exchanged.
    """
    old, new = _bag(a), _bag(b)
    old_stems = {t.stem for t in old}
    # A change the old text states in another voice ("migrated X to Y" / "X was migrated to Y")
    # is not a new change; one that ends a state ("no longer") always is.
    for marker in set(b.change_markers) - set(a.change_markers):
        if marker in NEGATING_MARKERS or stem(marker.split()[0]) not in old_stems:
            return None
    if b.additive_markers or a.negations % 2 != b.negations % 2:
        return None
    if not new:
        return None
    if any(not any(_same_stem(t.stem, u.stem) for u in old) for t in new):
        return None
    old_values = {t.stem for t in old if t.value}
    for t in new:
        if t.value:
            if t.stem not in old_values:
                return None
            near_b, near_a = _neighbours(new, t.stem), _neighbours(old, t.stem)
            if near_a and near_b and not near_a & near_b:
                return None
    new_stems = {t.stem for t in new}
    for i, t in enumerate(a.tokens[: a.verb]):
        if i and a.tokens[i - 1].low == "'s" and t.content and t.stem not in new_stems:
            return None
    if _swapped(a, b):
        return None
    dropped = [t for t in old if not any(_same_stem(t.stem, u.stem) for u in new)]
    return "says it again" + (f", without {_words(dropped)}" if dropped else "")


def covers(old: str, new: str) -> bool:
    """True when every content word of `new` is already in `old` (new adds nothing to find it by)."""
    have = {t.stem for _, t in parse_statement(old).content()}
    return all(t.stem in have for _, t in parse_statement(new).content())
