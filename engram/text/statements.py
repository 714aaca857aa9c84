"""One statement read for write-time resolution: its tokens (words, numbers, identifiers, names),
the markers of a change or an addition, its negations, and where its subject ends.

Pure text, closed-class English only; statement_diff.py diffs two of these, engine/resolution.py decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from engram.text.tokens import MORE_FUNCTION_WORDS, STOPWORDS, stem

# --- lexicon -------------------------------------------------------------------------------------
# Closed-class English words; none of this is specific to any stored memory.

# Function words: the base table and MORE_FUNCTION_WORDS, with the adverbs of frequency and the
# politeness words a statement's value does not lie in. "hers" and "yours" of the base table were
# never in this one: they read as words here.
STATEMENT_STOPWORDS = (
    STOPWORDS
    | MORE_FUNCTION_WORDS
    | frozenset(
        """
's it's across within upon even really quite rather always usually often sometimes many much several
please kindly ok okay
""".split()
    )
) - {"hers", "yours"}

_AUX = frozenset(
    """
is are was were be been being am has have had do does did will would can could shall should may
might must
""".split()
)

BE_HAVE = frozenset("is are was were be been being am has have had".split())

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
CALENDAR = frozenset(
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
ANTONYMS = {frozenset(stem(w) for w in pair.split()) for pair in _ANTONYM_WORDS.replace("\n", "").strip("|").split("|")}

# Negating prefixes: "dislikes" = "does not like", "unavailable" = "not available".
NEG_PREFIXES = ("dis", "un", "in", "im", "non", "non-")

# Predicates that hold many values at once: a second object adds, it does not replace.
SET_VALUED = frozenset(
    "allerg speak like love enjoy know own has have had play visit collect attend studi learn "
    "teach hobbi interest fan member".split()
)

# Phrases in the new text that say a value changed. Removed before diffing: they are signals,
# not content.
_AUX_PREFIX = r"\b(?:(?:has|have|had|was|were|is|are|has been|have been) )?"


def _change_verb(verbs: str, particles: str) -> str:
    """ "(was) switched to", "moving from": a change verb with its particle, aux optional."""
    return _AUX_PREFIX + f"(?:{'|'.join(verbs.split())}) (?:over )?(?:{particles})\\b"


def _markers(table: list[tuple[str, str]]) -> list[tuple[re.Pattern, str]]:
    """(pattern, label) rows compiled, case-insensitive."""
    return [(re.compile(p, re.IGNORECASE), label) for p, label in table]


_CHANGE_MARKERS = _markers(
    [
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
            _change_verb("increased decreased reduced raised lowered bumped scaled extended shortened cut", "from|to"),
            "changed to",
        ),
        (_AUX_PREFIX + r"(?:rescheduled|postponed)\b", "rescheduled"),
        (r"\b(?:(?:has|have|had) )?(?:stopped|quit)\b", "stopped"),
        (r"\bformerly\b", "formerly"),
        (r"\bpreviously\b", "previously"),
    ]
)

# Markers that end the old state without naming a new one: they negate it.
NEGATING_MARKERS = frozenset(["no longer", "not anymore", "anymore", "used to", "stopped", "formerly", "previously"])

# Words that say "the current state is": a change only when something else also changed.
_NOW_MARKERS = re.compile(r"\b(?:now|currently|nowadays|these days|as of now|from now on)\b", re.IGNORECASE)
# "the user's new phone number": an adjective that says the value was replaced (lower case only,
# so "New York" stays a name).
_NEW_VALUE = re.compile(r"\b(?:new|updated|latest|current)\b(?=\s+[a-z])")

_ADDITIVE_MARKERS = _markers(
    [
        (r"^\s*(?:in addition|additionally|also|besides|moreover|furthermore|plus)\s*,?", "in addition"),
        (r",?\s*as well(?=\s*[.!?;]?\s*$)", "as well"),
        (r",?\s*\btoo(?=\s*[.!?;]?\s*$)", "too"),
        (r"\balso\b", "also"),
        (r"\bin addition to\b", "in addition to"),
        (r"\banother\b", "another"),
    ]
)

# Short forms a note writer uses for the long ones ("the staging DB", "prod", "k8s", "a PR"): read
# as the words they stand for, so a restatement in short forms shares the long forms' stems.
_SHORT_FORMS = {
    short: tuple(long.split("_"))  # pr=pull_request: two words
    for short, long in (
        pair.split("=")
        for pair in """db=database dbs=databases prod=production dev=development env=environment
        envs=environments config=configuration configs=configurations repo=repository
        repos=repositories docs=documentation auth=authentication app=application
        apps=applications k8s=kubernetes pr=pull_request prs=pull_requests var=variable
        vars=variables deps=dependencies dep=dependency info=information admin=administrator
        admins=administrators msg=message msgs=messages pkg=package pkgs=packages dir=directory
        dirs=directories infra=infrastructure perf=performance impl=implementation vm=virtual_machine
        vms=virtual_machines secs=seconds mins=minutes hrs=hours tz=time_zone""".split()
    )
}

# Verbs that carry no fact of their own in a restatement ("the refresh happens on Sundays",
# "the DB gets refreshed", "deployments go through deploy.sh"): compared without them, as is
# "takes place".
LIGHT_VERBS = frozenset(stem(w) for w in "happen happens occur occurs get gets got go goes went".split())


def sentences(text: str) -> list[str]:
    """The sentences of `text`, in order. A line break ends one too (a merge joins its texts with
    one); a title or an initial ("Dr. Lee", "J. Smith") does not."""
    out: list[str] = []
    for line in text.splitlines():
        pieces = [p for p in _SENTENCE_END.split(line.strip()) if p.strip()]
        for k, piece in enumerate(pieces):
            prev = _words_of(pieces[k - 1]) if k else []
            last = prev[-1].lower() if prev else ""
            # A piece of bare punctuation ("... Then it failed") is no sentence of its own: it
            # leads the next one, as a title or an initial does.
            if k and (not prev or last in _TITLES or (len(last) == 1 and last.isalpha())):
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
    return out


def _words_of(piece: str) -> list[str]:
    """The words of a sentence piece, its closing punctuation stripped; none for bare punctuation."""
    return piece.rstrip(".!?\"')] ").split()


# A sentence ends at . ! or ? (and up to two closing quotes or brackets, which stay with it)
# before a capital, a digit or an opening quote.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]])|(?<=[.!?][\"')\]]{2}))\s+(?=[\"'(\[]?[A-Z0-9])")
_TITLES = frozenset("mr mrs ms dr st jr sr vs etc e.g i.e prof gen col lt no fig approx".split())

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
class Token:
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
class Parsed:
    tokens: tuple[Token, ...]
    change_markers: tuple[str, ...]
    now_marker: bool
    additive_markers: tuple[str, ...]
    negations: int
    verb: int  # index of the main verb (end of the subject noun phrase)
    head: int  # index of the predicate head (the verb, or the participle after an auxiliary)

    def content(self) -> list[tuple[int, Token]]:
        return [(i, t) for i, t in enumerate(self.tokens) if t.content]


def _classify(text: str, low: str, sentence_start: bool) -> tuple[str, str]:
    """-> (kind, stem)"""
    if low in _NUMBER_WORDS:
        return "num", _NUMBER_WORDS[low]
    if low in _NEGATION:
        return "neg", low
    if low in STATEMENT_STOPWORDS:
        return "func", low
    if any(c.isdigit() for c in low):
        if _THOUSANDS.match(low):
            low = low.replace(",", "")
        return "num", low
    if any(c in low for c in "@/._:+#"):
        return "ident", low
    if low in CALENDAR or low.rstrip("s") in CALENDAR:
        return "proper", low.rstrip("s") if low.rstrip("s") in CALENDAR else low
    upper_inside = any(c.isupper() for c in text[1:])
    if upper_inside or (text[0].isupper() and not sentence_start):
        return "proper", stem(low) if low.isalpha() else low
    return "word", stem(low)


def _strip_markers(text: str, markers: list[tuple[re.Pattern, str]]) -> tuple[str, list[str]]:
    found = []
    for pattern, label in markers:
        if pattern.search(text):
            found.append(label)
            text = pattern.sub(" ", text)
    return text, found


@lru_cache(maxsize=8192)  # a batch compares each text with several candidates, and they recur
def parse_statement(text: str) -> Parsed:
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    text, changes = _strip_markers(text, _CHANGE_MARKERS)
    now = bool(_NOW_MARKERS.search(text) or _NEW_VALUE.search(text))
    text = _NEW_VALUE.sub(" ", _NOW_MARKERS.sub(" ", text))
    text, additive = _strip_markers(text, _ADDITIVE_MARKERS)

    tokens: list[Token] = []
    prev_end = -1
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        gap = text[prev_end : m.start()] if prev_end >= 0 else "."
        sentence_start = any(c in ".!?:;\n" for c in gap)
        prev_end = m.end()
        low = raw.lower()
        if low == "'s":
            tokens.append(Token(raw, "'s", "'s", "func"))
            continue
        if low in _SHORT_FORMS:
            tokens.extend(Token(w, w, stem(w), "word") for w in _SHORT_FORMS[low])
            continue
        kind, root = _classify(raw, low, sentence_start)
        if low == "off" or (low == "on" and _PARTICLE_END.match(text, m.end())):
            kind, root = "word", low  # "turned on", "is off": a state, not a place
        tokens.append(Token(raw, low, root, kind))

    negations = sum(1 for t in tokens if t.kind == "neg")
    verb = _find_verb(tokens)
    head = _find_head(tokens, verb)
    return Parsed(tuple(tokens), tuple(changes), now, tuple(additive), negations, verb, head)


def _find_verb(tokens: Sequence[Token]) -> int:
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
        if i - 1 == first_content and prev.endswith("s") and not prev.endswith("ss") and not t.low.endswith("s"):
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


def _find_head(tokens: Sequence[Token], verb: int) -> int:
    """The verb, or for "is called" / "are run" the participle that carries the meaning."""
    if verb >= len(tokens) or tokens[verb].low not in _AUX:
        return verb
    do_or_modal = tokens[verb].low not in BE_HAVE
    for j in range(verb + 1, len(tokens)):
        t = tokens[j]
        if t.kind in ("func", "neg"):
            continue
        progressive = t.low.endswith("ing") and len(t.low) >= 5
        if t.kind == "word" and (do_or_modal or progressive or _participle(t.low) or t.low in _COMMON_VERBS):
            return j
        break
    return verb
