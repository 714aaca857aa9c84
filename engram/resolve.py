"""Write-time resolution: does a new memory reinforce, replace, merge with, or sit beside an old one?"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

import snowballstemmer

__all__ = [
    "ACTIONS",
    "RELATIONS",
    "Comparison",
    "Resolution",
    "compare",
    "compare_detail",
    "decide",
    "is_contradiction",
    "covers",
    "merge_contents",
]

ACTIONS: tuple[str, ...] = ("new", "reinforce", "merge", "replace")
RELATIONS: tuple[str, ...] = ("same", "contradiction", "addition", "unrelated")

_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=16384)
def _stem(word: str) -> str:
    # The pure-Python stemmer dominates parse time; memory text repeats words a lot.
    return _STEMMER.stemWord(word)


# Below this similarity two texts are NEW unless the text diff shows the same statement
# (one slot changed, most words shared). MiniLM scores real updates as low as ~0.5.
SIMILARITY_FLOOR = 0.45


@dataclass(frozen=True)
class Resolution:
    action: str  # "new" | "reinforce" | "merge" | "replace"
    target_id: str | None  # the existing memory acted on (None for new)
    similarity: float | None
    reason: str  # short human-readable why, e.g. "number changed: 30 -> 60"
    merged_content: str | None = None  # for merge: the combined text


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


# --- lexicon -------------------------------------------------------------------------------------
# Closed-class English words; none of this is specific to any stored memory.

_STOP = frozenset(
    """
a an the this that these those it its it's they them their there here we our us you your i my me
he him his she her who whom whose which what when where why how
and or but so if then than as of to in on at by for from with into onto over under about
after before during until via per up down out off through between within upon across
am is are was were be been being has have had do does did will would can could shall should may
might must 's
very really just quite rather only even still already always usually often sometimes every
each all any some many much more most few several other same such own
please kindly ok okay
""".split()
)

_AUX = frozenset(
    """
is are was were be been being am has have had do does did will would can could shall should may
might must
""".split()
)

_BE_HAVE = frozenset("is are was were be been being am has have had".split())

_NEGATION = frozenset("not no never none nobody nothing neither nor without cannot".split())

_DETERMINERS = frozenset("a an the this that these those my your his her its our their 's".split())

# Words after which the subject noun phrase has ended (adverbs that sit before the verb).
_PREVERBAL = frozenset(
    "always never often usually sometimes just still already also only really typically generally".split()
)

# Common verbs in base or irregular past form: these carry no -s/-ed ending, so a plural or
# imperative sentence ("Deploys go to ...", "Use npm ...") needs them to find its verb.
_COMMON_VERBS = frozenset(
    """
go went run ran use need want like love hate prefer live work take took make made get got keep
kept know knew see saw say said think give gave come came put set find found build built write
wrote read speak spoke eat ate drink drank buy bought pay paid send sent hold held stay require
support own enjoy play call avoid deploy install store save start stop
""".split()
)

_NUMBER_WORDS = {
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "thirteen": "13",
    "fourteen": "14",
    "fifteen": "15",
    "sixteen": "16",
    "seventeen": "17",
    "eighteen": "18",
    "nineteen": "19",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
    "hundred": "100",
    "thousand": "1000",
}

# Names of days and months are values even when typed in lower case.
_CALENDAR = frozenset(
    """
monday tuesday wednesday thursday friday saturday sunday january february march april june july
august september october november december jan feb mar apr jun jul aug sep sept oct nov dec
""".split()
)

# Pairs of stems that state opposite values of the same property.
_ANTONYM_WORDS = """
enabled disabled|on off|allowed denied|allowed forbidden|allowed blocked|permitted forbidden|
open closed|active inactive|true false|yes no|public private|included excluded|start stop|
accepted rejected|succeeded failed|success failure|required optional|mandatory optional|
visible hidden|online offline|up down|passed failed|available unavailable|locked unlocked|
increased decreased|sync async|synchronous asynchronous|like hate|love hate|light dark|
allow forbid|allow deny|enable disable|always never|before after|inside outside|min max|
minimum maximum|lower higher|lowercase uppercase|encrypted unencrypted|valid invalid|safe unsafe
"""
# Pairs of stems that state opposite values of the same property.
_ANTONYMS = {
    frozenset(_stem(w) for w in pair.split())
    for pair in _ANTONYM_WORDS.replace("\n", "").strip("|").split("|")
}

# Negating prefixes: "dislikes" = "does not like", "unavailable" = "not available".
_NEG_PREFIXES = ("dis", "un", "in", "im", "non", "non-")

# Predicates that hold many values at once: a second object adds, it does not replace.
_SET_VALUED = frozenset(
    "allerg speak like love enjoy know own has have had play visit collect attend studi learn "
    "teach hobbi interest fan member".split()
)

# Phrases in the new text that say a value changed. Removed before diffing: they are signals,
# not content.
_AUX_PREFIX = r"\b(?:(?:has|have|had|was|were|is|are|has been|have been) )?"


def _change_verb(verbs: str, particles: str) -> str:
    """ "(was) switched to", "moving from": a change verb with its particle, aux optional."""
    return _AUX_PREFIX + f"(?:{'|'.join(verbs.split())}) (?:over )?(?:{particles})\\b"


_CHANGE_MARKERS = [
    (re.compile(p, re.IGNORECASE), label)
    for p, label in [
        (r"\bno longer\b", "no longer"),
        (r"\bnot any ?more\b", "not anymore"),
        (r"\bany ?more\b", "anymore"),
        (r"\binstead of\b", "instead of"),
        (r"\binstead\b", "instead"),
        (r"\bused to\b", "used to"),
        (_change_verb("switched switching switches switch", "from|to|back to"), "switched to"),
        (_change_verb("moved moving moves relocated relocating", "from|to|back to"), "moved to"),
        (_change_verb("migrated migrating migrates", "from|to"), "migrated to"),
        (_change_verb("changed changing changes", "from|to"), "changed to"),
        (_change_verb("replaced replacing replaces", "by|with"), "replaced"),
        (_change_verb("upgraded downgraded updated renamed rescheduled postponed", "from|to"), "updated to"),
        (
            _change_verb(
                "increased decreased reduced raised lowered bumped scaled extended shortened cut", "from|to"
            ),
            "changed to",
        ),
        (_AUX_PREFIX + r"(?:rescheduled|postponed)\b", "rescheduled"),
        (r"\b(?:(?:has|have|had) )?(?:stopped|quit)\b", "stopped"),
        (r"\bformerly\b", "formerly"),
        (r"\bpreviously\b", "previously"),
    ]
]

# Markers that end the old state without naming a new one: they negate it.
_NEGATING_MARKERS = frozenset(
    ["no longer", "not anymore", "anymore", "used to", "stopped", "formerly", "previously"]
)

# Words that say "the current state is": a change only when something else also changed.
_NOW_MARKERS = re.compile(r"\b(?:now|currently|nowadays|these days|as of now|from now on)\b", re.IGNORECASE)
# "the user's new phone number": an adjective that says the value was replaced (lower case only,
# so "New York" stays a name).
_NEW_VALUE = re.compile(r"\b(?:new|updated|latest|current)\b(?=\s+[a-z])")

_ADDITIVE_MARKERS = [
    (re.compile(p, re.IGNORECASE), label)
    for p, label in [
        (r"^\s*(?:in addition|additionally|also|besides|moreover|furthermore|plus)\s*,?", "in addition"),
        (r",?\s*as well(?=\s*[.!?;]?\s*$)", "as well"),
        (r",?\s*\btoo(?=\s*[.!?;]?\s*$)", "too"),
        (r"\balso\b", "also"),
        (r"\bin addition to\b", "in addition to"),
        (r"\banother\b", "another"),
    ]
]

# --- tokenising ----------------------------------------------------------------------------------

_CONTRACTIONS = [
    (re.compile(r"\bcan't\b", re.IGNORECASE), "can not"),
    (re.compile(r"\bwon't\b", re.IGNORECASE), "will not"),
    (re.compile(r"\bshan't\b", re.IGNORECASE), "shall not"),
    (re.compile(r"n't\b", re.IGNORECASE), " not"),
    (re.compile(r"'re\b", re.IGNORECASE), " are"),
    (re.compile(r"'m\b", re.IGNORECASE), " am"),
    (re.compile(r"'ve\b", re.IGNORECASE), " have"),
    (re.compile(r"'ll\b", re.IGNORECASE), " will"),
    (re.compile(r"'d\b", re.IGNORECASE), " would"),
    (re.compile(r"\b(it|that|there|what|here|who|he|she)'s\b", re.IGNORECASE), r"\1 is"),
]

_TOKEN = re.compile(
    r"""
    [\w.+-]+@[\w-]+(?:\.[\w-]+)+                 # e-mail
  | [a-z][a-z0-9+.-]*://[^\s,;]*[^\s,;.!?)]      # url
  | \d+(?:[.,:/-]\d+)*                           # number, version, date, time, IP
  | [^\W\d_][\w]*(?:[./_+#-]\w+)*\+*             # word, name.tld, path, C++
  | '[sS]\b                                      # possessive
    """,
    re.VERBOSE,
)

# What may follow "on" when it is a state ("caching is on for ...") rather than a preposition.
_PARTICLE_END = re.compile(
    r"\s*(?:[.,;!?]|$|(?:for|in|at|by|during|since|until|when|if|and|but|again|now)\b)", re.IGNORECASE
)
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")


@dataclass(frozen=True)
class _Token:
    text: str
    low: str
    stem: str
    kind: str  # func | neg | word | num | ident | proper

    @property
    def content(self) -> bool:
        return self.kind in ("word", "num", "ident", "proper")

    @property
    def value(self) -> bool:
        """A literal value: a number, an identifier or a name."""
        return self.kind in ("num", "ident", "proper")


@dataclass(frozen=True)
class _Parsed:
    tokens: tuple[_Token, ...]
    change_markers: tuple[str, ...]
    now_marker: bool
    additive_markers: tuple[str, ...]
    negations: int
    verb: int  # index of the main verb (end of the subject noun phrase)
    head: int  # index of the predicate head (the verb, or the participle after an auxiliary)

    def content(self) -> list[tuple[int, _Token]]:
        return [(i, t) for i, t in enumerate(self.tokens) if t.content]


def _classify(text: str, low: str, sentence_start: bool) -> tuple[str, str]:
    """-> (kind, stem)"""
    if low in _NUMBER_WORDS:
        return "num", _NUMBER_WORDS[low]
    if low in _NEGATION:
        return "neg", low
    if low in _STOP:
        return "func", low
    if any(c.isdigit() for c in low):
        if _THOUSANDS.match(low):
            low = low.replace(",", "")
        return "num", low
    if any(c in low for c in "@/._:+#"):
        return "ident", low
    if low in _CALENDAR or low.rstrip("s") in _CALENDAR:
        return "proper", low.rstrip("s") if low.rstrip("s") in _CALENDAR else low
    upper_inside = any(c.isupper() for c in text[1:])
    if upper_inside or (text[0].isupper() and not sentence_start):
        return "proper", _stem(low) if low.isalpha() else low
    return "word", _stem(low)


def _strip_markers(text: str, markers: list[tuple[re.Pattern, str]]) -> tuple[str, list[str]]:
    found = []
    for pattern, label in markers:
        if pattern.search(text):
            found.append(label)
            text = pattern.sub(" ", text)
    return text, found


@lru_cache(maxsize=8192)  # a batch compares each text with several candidates, and they recur
def _parse(text: str) -> _Parsed:
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    text, changes = _strip_markers(text, _CHANGE_MARKERS)
    now = bool(_NOW_MARKERS.search(text) or _NEW_VALUE.search(text))
    text = _NEW_VALUE.sub(" ", _NOW_MARKERS.sub(" ", text))
    text, additive = _strip_markers(text, _ADDITIVE_MARKERS)

    tokens: list[_Token] = []
    prev_end = -1
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        gap = text[prev_end : m.start()] if prev_end >= 0 else "."
        sentence_start = any(c in ".!?:;\n" for c in gap)
        prev_end = m.end()
        low = raw.lower()
        if low == "'s":
            tokens.append(_Token(raw, "'s", "'s", "func"))
            continue
        kind, stem = _classify(raw, low, sentence_start)
        if low == "off" or (low == "on" and _PARTICLE_END.match(text, m.end())):
            kind, stem = "word", low  # "turned on", "is off": a state, not a place
        tokens.append(_Token(raw, low, stem, kind))

    negations = sum(1 for t in tokens if t.kind == "neg")
    verb = _find_verb(tokens)
    head = _find_head(tokens, verb)
    return _Parsed(tuple(tokens), tuple(changes), now, tuple(additive), negations, verb, head)


def _find_verb(tokens: Sequence[_Token]) -> int:
    """Index where the subject noun phrase ends: the first auxiliary or verb-looking word."""
    first_content = next((i for i, t in enumerate(tokens) if t.content), len(tokens))
    for i, t in enumerate(tokens):
        seen_content = i > first_content
        if t.low in _AUX:
            return i
        if t.kind == "neg" or t.low in _PREVERBAL:
            if seen_content:
                return i
            continue
        if t.kind != "word":
            continue
        prev = tokens[i - 1].low if i else ""
        if i == first_content:
            # Imperative: a sentence that opens with a bare verb has no subject.
            if t.low in _COMMON_VERBS and prev not in _DETERMINERS:
                return i
            continue
        if prev in _DETERMINERS or (i and tokens[i - 1].kind == "num"):
            continue  # a noun right after "the" / "'s" / "24"
        if (
            i - 1 == first_content
            and prev.endswith("s")
            and not prev.endswith("ss")
            and not t.low.endswith("s")
        ):
            return i  # bare plural subject + base verb: "Sessions expire", "Deploys go"
        nxt = tokens[i + 1].low if i + 1 < len(tokens) else ""
        if t.low in _COMMON_VERBS:
            return i
        looks_verb = (t.low.endswith("s") and not t.low.endswith(("ss", "us", "is"))) or _participle(t.low)
        if looks_verb and nxt not in _AUX:
            return i
    return min(first_content + 1, len(tokens))


# Irregular past participles; regular ones end in -ed.
_IRREGULAR_PARTICIPLES = frozenset(
    """
written taken given chosen broken forgotten hidden driven known shown seen done gone run built
kept set put made found sent held paid bought read spoken eaten drunk begun stolen frozen woken
""".split()
)


def _participle(word: str) -> bool:
    if word in _IRREGULAR_PARTICIPLES:
        return True
    return word.endswith("ed") and len(word) >= 5 and not word.endswith("eed")


def _find_head(tokens: Sequence[_Token], verb: int) -> int:
    """The verb, or for "is called" / "are run" the participle that carries the meaning."""
    if verb >= len(tokens) or tokens[verb].low not in _AUX:
        return verb
    do_or_modal = tokens[verb].low not in _BE_HAVE
    for j in range(verb + 1, len(tokens)):
        t = tokens[j]
        if t.kind in ("func", "neg"):
            continue
        progressive = t.low.endswith("ing") and len(t.low) >= 5
        if t.kind == "word" and (do_or_modal or progressive or _participle(t.low) or t.low in _COMMON_VERBS):
            return j
        break
    return verb


# --- comparing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Region:
    op: str  # replace | insert | delete
    old: tuple[_Token, ...]
    new: tuple[_Token, ...]
    where: str  # subject | head | object | mixed
    old_subject: tuple[_Token, ...] = ()  # the part of each side inside its subject phrase
    new_subject: tuple[_Token, ...] = ()


def _where(p: _Parsed, idxs: Sequence[int]) -> set[str]:
    out = set()
    for i in idxs:
        if i < p.verb:
            out.add("subject")
        elif i == p.head or i == p.verb:
            out.add("head")
        else:
            out.add("object")
    return out


def _regions(a: _Parsed, b: _Parsed) -> tuple[list[_Region], int]:
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


def _words(tokens: Sequence[_Token]) -> str:
    return " ".join(t.text for t in tokens) or "(nothing)"


def _stem_words(p: _Parsed, stems: set[str]) -> str:
    """The words of p whose stems are in `stems`, in text order."""
    return _words([t for _, t in p.content() if t.stem in stems])


def _negated_pair(x: _Token, y: _Token) -> bool:
    """True when one word is the other with a negating prefix (likes / dislikes)."""
    for a, b in ((x, y), (y, x)):
        for pre in _NEG_PREFIXES:
            stripped = a.low[len(pre) :]
            if a.low.startswith(pre) and len(stripped) >= 3 and _stem(stripped) == b.stem:
                return True
    return False


def _value_kind(tokens: Sequence[_Token]) -> str:
    if any(t.kind == "num" for t in tokens):
        return "number"
    if any(t.low in _CALENDAR for t in tokens):
        return "date"
    if any(t.kind == "ident" for t in tokens):
        return "value"
    if any(t.kind == "proper" for t in tokens):
        return "name"
    return "value"


def _set_valued(a: _Parsed, prefix_stems: Sequence[str]) -> bool:
    """Is the changed slot the object of a many-valued predicate ("speaks", "allergic to")?"""
    verb = a.tokens[a.verb].low if a.verb < len(a.tokens) else ""
    near = set(prefix_stems[-2:]) | {verb}
    return bool(near & _SET_VALUED)


def compare_detail(old: str, new: str) -> Comparison:  # noqa: C901 - resolution's decision table, read as a whole in one place
    """Classify how `new` relates to `old`, with the evidence (see Comparison.basis)."""
    a, b = _parse(old), _parse(new)
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
    if set(b.change_markers) <= _NEGATING_MARKERS and (b.change_markers or neg_new > neg_old):
        vals_old = {t.stem for _, t in a.content() if t.value}
        vals_new = {t.stem for _, t in b.content() if t.value}
        others = vals_old - vals_new
        if others and ((vals_new and not vals_new & vals_old) or a.change_markers):
            return out("unrelated", f"ends {_stem_words(b, vals_new) if vals_new else 'a state'} while the "
                       f"old memory states {_stem_words(a, others)}", "old-value")

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

    if b.change_markers and (regions or flipped or set(b.change_markers) & _NEGATING_MARKERS):
        return out("contradiction", f"change marker: {b.change_markers[0]}", "marker")
    if flipped and overlap >= 0.5:
        return out("contradiction", "negation removed" if neg_old > neg_new else "negation added", "negation")

    replaces = [r for r in regions if r.op == "replace"]
    for r in replaces:
        if len(r.old) == 1 and len(r.new) == 1 and frozenset((r.old[0].stem, r.new[0].stem)) in _ANTONYMS:
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
        if (
            r.old
            and r.new
            and not moved
            and r.where != "head"
            and small
            and (has_value or r.where == "object")
        ):
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
    if all(r.where == "head" and _only_verb_changed(a, b, r) for r in regions) and not any(
        t.value for t in novel
    ):
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


def _without_verbs(a: _Parsed, b: _Parsed, r: _Region) -> _Region:
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


def _only_verb_changed(a: _Parsed, b: _Parsed, r: _Region) -> bool:
    """ "lives" -> "is based": at most one side changed anything besides its verb."""
    head_a = a.tokens[a.head] if a.head < len(a.tokens) else None
    head_b = b.tokens[b.head] if b.head < len(b.tokens) else None
    extra_old = [t for t in r.old if t is not head_a]
    extra_new = [t for t in r.new if t is not head_b]
    return not (extra_old and extra_new)


def _shared_prefix_stems(a: _Parsed, region: _Region) -> list[str]:
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


# --- deciding ------------------------------------------------------------------------------------

_PRIORITY = {"reinforce": 3, "replace": 2, "merge": 1, "new": 0}

# A sentence ends at . ! or ? before a capital, a digit or an opening quote; a title or an
# initial ("Dr. Lee", "J. Smith") does not end one.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr vs etc e.g i.e prof gen col lt no fig approx".split())


def sentence_count(text: str) -> int:
    """How many sentences `text` holds (at least 1). A line break ends one too: a merge joins
    its two texts with one, and the result holds two statements however they were punctuated."""
    return sum(_line_sentences(line) for line in text.splitlines() if line.strip()) or 1


def _line_sentences(text: str) -> int:
    pieces = [p for p in _SENTENCE_END.split(text.strip()) if p.strip()]
    n = 1
    for prev in pieces[:-1]:
        last = prev.rstrip(".!?\"')] ").rsplit(None, 1)[-1].lower() if prev.strip() else ""
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        n += 1
    return n


def _compound_action(c: Comparison, sim: float, reinforce_threshold: float) -> str:
    """Resolution for text of several sentences (a message, a paragraph).

    The rules above read one statement's subject, verb and object; across several sentences
    they compare unrelated clauses, and a merge or replace would fuse or hide separate
    statements. Only a near-identical text is recognised as the same memory.
    """
    if c.basis in ("identical", "subset") and sim >= reinforce_threshold:
        return "reinforce"
    return "new"


def _action(c: Comparison, sim: float, reinforce_threshold: float, dedup_threshold: float) -> str:
    """One candidate: the action the text evidence supports at this similarity."""
    high = sim >= reinforce_threshold
    mid = dedup_threshold <= sim < reinforce_threshold
    low = SIMILARITY_FLOOR <= sim < dedup_threshold
    # Below the floor only a near-identical frame (most words shared) counts as the same subject.
    close_text = c.overlap >= 0.6

    if c.basis in ("subject-swap", "disjoint", "old-value"):
        # Nothing in common (disjoint) or old news (old-value): storing beside is the only
        # action that keeps both texts findable as they were written.
        return "new"
    # A reinforce keeps only the old text: never when the new one names a value the old lacks.
    keeps_new = not c.new_values
    if c.basis in ("subject-qualifier", "other-fact"):
        # A paraphrase may reword the subject ("tests" / "the test suite"); trust a high score.
        return "reinforce" if high and keeps_new else "new"
    if c.relation == "contradiction":
        return "replace" if (high or mid or low or close_text) else "new"
    if c.relation == "addition":
        return "merge" if (high or mid or low or close_text) else "new"
    if c.basis in ("identical", "subset", "reworded"):
        return "reinforce" if (high or mid or (c.basis == "identical" and (low or close_text))) else "new"
    # loose: similarity alone decides, as the base policy says.
    if high:
        return "reinforce" if keeps_new else "merge"
    if mid:
        return "merge"
    return "new"


def decide(
    new: str,
    candidates: Sequence[tuple[str, str, float]],
    *,
    reinforce_threshold: float = 0.85,
    dedup_threshold: float = 0.65,
) -> Resolution:
    """Choose what storing `new` does, given similar existing memories.

    candidates: (memory_id, content, cosine similarity) of existing active memories, any order.
    Among candidates, reinforce beats replace beats merge; ties go to the more similar one.
    """
    best: Resolution | None = None
    best_key: tuple[int, float] | None = None
    closest: tuple[float, Comparison] | None = None  # to explain a NEW
    new_compound = sentence_count(new) > 1
    for memory_id, content, sim in candidates:
        sim = float(sim)
        if new_compound or sentence_count(content) > 1:
            # Below the reinforce threshold the answer is NEW whatever the text says: skip parsing.
            c = compare_detail(content, new) if sim >= reinforce_threshold else None
            action = _compound_action(c, sim, reinforce_threshold) if c is not None else "new"
            if action == "new":
                c = Comparison("unrelated", "several sentences, not near-identical", "compound",
                               c.overlap if c is not None else 0.0)
        else:
            c = compare_detail(content, new)
            action = _action(c, sim, reinforce_threshold, dedup_threshold)
        if action == "new":
            if closest is None or sim > closest[0]:
                closest = (sim, c)
            continue
        key = (_PRIORITY[action], sim)
        if best_key is None or key > best_key:
            merged = merge_contents(content, new) if action == "merge" else None
            best = Resolution(action, memory_id, sim, f"{c.relation} ({c.basis}): {c.reason}", merged)
            best_key = key
    if best is not None:
        return best
    if closest is None:
        return Resolution("new", None, None, "no similar memory")
    sim, c = closest
    if c.relation == "unrelated":
        reason = f"{c.reason} (best similarity {sim:.2f})"
    else:
        reason = f"too far apart for {c.relation} (best similarity {sim:.2f})"
    return Resolution("new", None, sim, reason)


# --- merging -------------------------------------------------------------------------------------

MERGE_SEPARATOR = "\n"


def covers(old: str, new: str) -> bool:
    """True when every content word of `new` is already in `old` (new adds nothing to find it by)."""
    have = {t.stem for _, t in _parse(old).content()}
    return all(t.stem in have for _, t in _parse(new).content())


def merge_contents(old: str, new: str) -> str:
    """One text holding both, each exactly as written: old, a line break, new.

    Neither text is rewritten, re-cased or trimmed, so both stay findable by every word they
    had and each can be read back byte for byte. When one text already contains the other
    verbatim, that one is the merge.
    """
    if new in old:
        return old
    if old in new:
        return new
    return f"{old}{MERGE_SEPARATOR}{new}"
