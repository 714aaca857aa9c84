"""The one tokenizer: lower-cased, stemmed word terms without stopwords, irregular past forms as their
base, CJK text as character bigrams. BM25 (search/bm25.py) and the recall cues use it."""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import snowballstemmer

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_stemmer = snowballstemmer.stemmer("english")
_stemmer_lock = threading.Lock()

# The base stopword table: what BM25 drops. Statement reading and step matching drop more (and
# keep a few of these); each declares its differences against this table and the next.
STOPWORDS = frozenset(
    """
a an and are as at be been but by can could did do does for from had has have he her hers him his
how i if in into is it its me my of on or our she so that the their them then there these they this
those to was we were what when where which who whom why will with would you your yours am about
""".split()
)
# Closed-class words beyond the base table (prepositions, quantifiers, modals, adverbs of degree):
# BM25 keeps them; statement reading and step matching both drop them, with words of their own.
MORE_FUNCTION_WORDS = frozenset(
    """
here us whose than onto over under after before during until via per up down out off through between
being shall should may might must very just only still already all any every each some more most few
other same such own
""".split()
)


# English irregular verbs: past forms -> the base form. The stemmer joins "painted" and "paint"
# but not "bought" and "buy", and questions ask with the base form after "did" ("When did she
# buy the figurines?", "Where did we go?") about a text that says "I bought them", "we went".
# Forms that are as often another word are left out ("left", "rose", "ground", "bore", "lay").
_IRREGULAR = {
    past: base
    for base, forms in {
        "arise": "arose arisen",
        "become": "became",
        "begin": "began begun",
        "bite": "bitten",
        "blow": "blew blown",
        "break": "broke broken",
        "bring": "brought",
        "build": "built",
        "burn": "burnt",
        "buy": "bought",
        "catch": "caught",
        "choose": "chose chosen",
        "come": "came",
        "creep": "crept",
        "deal": "dealt",
        "dig": "dug",
        "draw": "drew drawn",
        "dream": "dreamt",
        "drink": "drank drunk",
        "drive": "drove driven",
        "eat": "ate eaten",
        "fall": "fallen",
        "feed": "fed",
        "feel": "felt",
        "fight": "fought",
        "find": "found",
        "flee": "fled",
        "fly": "flew flown",
        "forbid": "forbade forbidden",
        "forget": "forgot forgotten",
        "forgive": "forgave forgiven",
        "freeze": "froze frozen",
        "get": "got gotten",
        "give": "gave given",
        "go": "went gone",
        "grow": "grew grown",
        "hang": "hung",
        "hear": "heard",
        "hide": "hid hidden",
        "hold": "held",
        "keep": "kept",
        "know": "knew known",
        "lead": "led",
        "lend": "lent",
        "lose": "lost",
        "make": "made",
        "mean": "meant",
        "meet": "met",
        "pay": "paid",
        "ride": "rode ridden",
        "ring": "rang rung",
        "rise": "risen",
        "run": "ran",
        "say": "said",
        "see": "saw seen",
        "seek": "sought",
        "sell": "sold",
        "send": "sent",
        "shake": "shook shaken",
        "shine": "shone",
        "shoot": "shot",
        "sing": "sang sung",
        "sink": "sank sunk",
        "sit": "sat",
        "sleep": "slept",
        "slide": "slid",
        "speak": "spoke spoken",
        "spend": "spent",
        "stand": "stood",
        "steal": "stole stolen",
        "stick": "stuck",
        "sting": "stung",
        "strike": "struck",
        "swim": "swam swum",
        "swing": "swung",
        "take": "took taken",
        "teach": "taught",
        "tear": "torn",
        "tell": "told",
        "think": "thought",
        "throw": "threw thrown",
        "understand": "understood",
        "wake": "woke woken",
        "wear": "wore worn",
        "win": "won",
        "write": "wrote written",
    }.items()
    for past in forms.split()
}

# Chinese, Japanese and Korean script: hiragana, katakana, CJK ideographs, hangul. These
# languages do not put spaces between words (Korean puts them between phrases with particles
# attached), so their text is split into overlapping character bigrams ("部署环境" -> 部署 署环
# 环境): a two-character word, the commonest length in Chinese, is then one term, and no
# dictionary or segmenter model is needed.
CJK = re.compile(
    r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]+"
)
# Function characters that end a run as a space would: Chinese particles and question words
# (the stopwords of a question such as "周会是什么时候"), Japanese case particles. Without them a
# question's bigrams are mostly words no memory holds, which would read as missing evidence.
_CJK_STOP = frozenset("的了吗呢么什怎哪谁是吧啊呀和与就都也这那个はがをにでとのへもかねよ")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Snowball (Porter 2) stem of a lower-cased English word, cached: the one stemmer of engram
    (BM25, statement reading, step matching)."""
    # A Snowball stemmer keeps the word it works on in itself: two threads must not share it at
    # once. Only a word not yet in the cache gets here.
    with _stemmer_lock:
        return _stemmer.stemWord(word)


def _cjk_runs(run: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    for ch in run:
        if ch in _CJK_STOP:
            if cur:
                out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _cjk_terms(run: str, query: bool) -> list[str]:
    """Bigrams of a run of CJK characters (split at function characters). A stored text also
    gets each character alone, so a one-character query ("猫") finds it."""
    terms = []
    for part in _cjk_runs(run):
        if len(part) == 1:
            terms.append(part)
            continue
        terms.extend(part[i : i + 2] for i in range(len(part) - 1))
        if not query:
            terms.extend(part)
    return terms


def term(word: str) -> str:
    """The term of one lower-cased word of letters (as tokenize makes it)."""
    return stem(_IRREGULAR.get(word, word))


def tokenize(text: str, query: bool = False, seen: dict[str, str] | None = None) -> list[str]:
    """Lower-cased, stemmed word tokens without stopwords (Porter-style, as DuckDB FTS does), an
    irregular verb's past form as its base form; CJK text as character bigrams (see _cjk_terms).
    `query`: tokens of a query, not a text. `seen`: each word of letters at least SPELL_MIN_LEN
    long is recorded there with its term (the words spelling correction may offer)."""
    out = []
    for w in _TOKEN.findall(text.lower()):
        if CJK.search(w):
            pos = 0
            for m in CJK.finditer(w):
                out.extend(tokenize(w[pos : m.start()], query, seen))
                out.extend(_cjk_terms(m.group(), query))
                pos = m.end()
            out.extend(tokenize(w[pos:], query, seen))
            continue
        w = w.replace("’", "'")
        if w.endswith("'s"):
            w = w[:-2]
        if w in STOPWORDS or not w:
            continue
        t = term(w)
        out.append(t)
        if seen is not None and w not in seen and len(w) >= SPELL_MIN_LEN and w.isalpha():
            seen[w] = t
    return out


# The shortest word whose term tokenize records for spelling correction (search/bm25.py, where
# the rule is explained).
SPELL_MIN_LEN = 4
