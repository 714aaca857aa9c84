"""A long-conversation set whose questions paraphrase their evidence (issue 47, gap 1), generated
reproducibly at run time: hundreds of dated sessions, thousands of turns pooled in one store, the
answers stated in short user turns, the assistant's replies very long (several thousand
characters) and on the session's subject.

benchmarks.long_chat's questions name a rare word of their answer ("What is the name of my
gecko?" beside "Our gecko is called Velmar"), so BM25 finds the turn and hides what the vectors
do. Here a question says it in other words ("What did we call the lizard we adopted?" beside
"Our new gecko is called Velmar; we picked him up from the shelter on Saturday"), as people ask
about a chat weeks later: the match is by meaning, and the user's short turn competes with long
replies on the same subject, each cut into many chunks.

Nothing of it is committed and no text is copied: the facts and questions are the templates
below with made-up names, the replies are sentences built from each subject's words by the
frames below, and the user's small talk between requests is LoCoMo's dialogue lines (read from
../shared at run time, speaker names dropped). One seed fixes everything; the same seed gives
the same set byte for byte.

The set has the shape of tests/data/long_sessions.json and is run by benchmarks.long_sessions
(one memory per turn, `conversation` the session, `created_at` its date), beside the bare model
(benchmarks.plain_cosine). `--components` also measures, on the same set, what each part of
engram's ranking does (one at a time, from the defaults), and the bare model scoring each turn as
its best 1,000-character chunk, as engram's long turns score:

    python -m benchmarks.paraphrase_chat [--data ../shared/locomo/locomo10.json] [--components]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 47
SESSIONS = 200
PAIRS = (4, 6)  # user/assistant exchanges per session, inclusive
FACTS = 200  # answered questions, each stated in a short user turn
NEAR = 40  # questions of the same shape that nothing answers
START = datetime(2021, 3, 1, 9, 0, tzinfo=timezone.utc)
SPAN_DAYS = 3 * 365  # sessions over three years
LONG_REPLY = (2000, 6000)  # characters, log-uniform: the replies that are cut into chunks
SHORT_REPLY = (300, 900)
LONG_SHARE = 0.8  # of the assistant's replies

_SYL = (
    "ka", "lo", "mi", "ren", "sa", "tor", "vel", "bri", "dun", "ema", "fal", "gor", "hal", "ine",
    "jor", "kel", "lun", "mar", "nor", "osk", "pel", "qui", "ras", "sel", "tam", "ul", "var", "wen",
    "yor", "zel", "ba", "cor", "dea", "fen", "gil", "han",
)  # fmt: skip

# Key pools: (the word a fact uses, the words a question uses for it). The question never
# repeats the fact's word, as a person asking weeks later rarely does.
RELATIVES = (
    ("sister", "female sibling"), ("brother", "male sibling"), ("mother", "mum"), ("father", "dad"),
    ("grandmother", "gran"), ("grandfather", "grandpa"), ("wife", "spouse"), ("husband", "other half"),
    ("best friend", "closest mate"), ("neighbour", "person living next door"), ("roommate", "flatmate"),
    ("boss", "manager at work"), ("coworker", "colleague"), ("son", "boy"), ("daughter", "girl"),
    ("uncle", "dad's brother"), ("aunt", "mum's sister"), ("godmother", "godparent"),
)  # fmt: skip
ANIMALS = (
    ("dog", "pup"), ("cat", "kitty"), ("rabbit", "bunny"), ("parrot", "talking bird"), ("horse", "mare"),
    ("tortoise", "shelled reptile"), ("hamster", "little rodent"), ("goldfish", "aquarium pet"),
    ("canary", "songbird"), ("ferret", "weasel-like pet"), ("gecko", "lizard"), ("guinea pig", "cavy"),
    ("hedgehog", "spiny pet"), ("pony", "small horse"),
)  # fmt: skip
INSTRUMENTS = (
    ("piano", "keys"), ("violin", "fiddle"), ("cello", "big string instrument"), ("drums", "percussion kit"),
    ("flute", "woodwind"), ("trumpet", "brass horn"), ("ukulele", "little four-string"), ("saxophone", "sax"),
    ("harp", "plucked strings"), ("accordion", "squeezebox"), ("banjo", "twangy five-string"),
    ("bass guitar", "low-end strings"),
)  # fmt: skip
CITIES = (
    ("Lisbon", "the Portuguese capital"), ("Kyoto", "the old imperial city of Japan"),
    ("Denver", "the Mile High City"), ("Edinburgh", "the Scottish capital"), ("Barcelona", "the Catalan capital"),
    ("Vienna", "the Austrian capital"), ("Prague", "the Czech capital"), ("Chicago", "the Windy City"),
    ("Venice", "the city of canals"), ("Paris", "the French capital"), ("Amsterdam", "the Dutch capital"),
    ("Seoul", "the South Korean capital"), ("Athens", "the Greek capital"), ("Dublin", "the Irish capital"),
    ("Istanbul", "the city on the Bosphorus"), ("Cairo", "the Egyptian capital"),
    ("Nashville", "the home of country music"), ("New Orleans", "the birthplace of jazz"),
    ("Berlin", "the German capital"), ("Rome", "the Eternal City"),
)  # fmt: skip
DISHES = (
    ("lasagne", "layered pasta bake"), ("sushi", "raw fish rolls"), ("paella", "Spanish rice pan"),
    ("dumplings", "stuffed dough parcels"), ("curry", "spiced stew"), ("tacos", "folded tortillas"),
    ("pho", "Vietnamese noodle soup"), ("risotto", "creamy Italian rice"), ("pancakes", "breakfast flapjacks"),
    ("brownies", "chocolate squares"), ("sourdough", "tangy loaf"), ("bibimbap", "Korean rice bowl"),
    ("falafel", "chickpea fritters"), ("goulash", "Hungarian stew"),
)  # fmt: skip
ACTIVITIES = (
    ("swimming", "laps in the pool"), ("yoga", "stretching classes"), ("boxing", "sparring sessions"),
    ("pilates", "core classes"), ("climbing", "bouldering"), ("spinning", "indoor cycling"),
    ("rowing", "time on the erg"), ("tennis", "racket lessons"), ("judo", "martial arts"),
    ("weightlifting", "strength training"), ("running club", "group jogs"), ("salsa", "Latin dance"),
)  # fmt: skip
ROOMS = (
    ("kitchen", "room where we cook"), ("bedroom", "room we sleep in"), ("bathroom", "washroom"),
    ("living room", "lounge"), ("hallway", "entrance corridor"), ("study", "home office"),
    ("nursery", "baby's room"), ("garage", "place we park the car"), ("attic", "loft"), ("basement", "cellar"),
)  # fmt: skip
PLANTS = (
    ("orchid", "exotic bloom"), ("cactus", "spiky succulent"), ("fiddle-leaf fig", "big leafy tree indoors"),
    ("monstera", "Swiss cheese plant"), ("peace lily", "white-flowered houseplant"), ("bonsai", "miniature tree"),
    ("lavender", "purple herb"), ("jade plant", "money tree"), ("fern", "frond plant"), ("basil", "pesto herb"),
)  # fmt: skip
POOLS = {
    "relative": RELATIVES,
    "animal": ANIMALS,
    "instrument": INSTRUMENTS,
    "city": CITIES,
    "dish": DISHES,
    "activity": ACTIVITIES,
    "room": ROOMS,
    "plant": PLANTS,
}
FOODS = ("peanuts", "shellfish", "sesame", "kiwi", "mustard", "celery", "walnuts", "soy", "strawberries", "eggs")
JOBS = ("nurse", "architect", "data analyst", "chef", "teacher", "pilot", "carpenter", "pharmacist", "translator")
COLOURS = ("sage green", "navy blue", "terracotta", "pale yellow", "charcoal grey", "dusty pink", "teal", "cream")
SPOTS = ("bathroom windowsill", "north-facing hallway", "balcony", "kitchen shelf", "bedroom corner", "porch")
MONTHS = ("March", "April", "May", "June", "July", "August", "September", "October")
GIFTS = ("watch", "scarf", "leather wallet", "camera", "pair of earrings", "fountain pen", "record player")

# (topic, key pool, the fact a user states, the question asked later). The question shares no
# rare word with the fact; {q} is the key in the question's words.
TEMPLATES = (
    ("pets", "animal", "Our new {k} is called {Name}; we picked {pron} up from the shelter on Saturday.",
     "What did we call the {q} we adopted?"),
    ("family", "relative", "My {k} just started work as a {job} over in {city}.",
     "What line of work did my {q} recently go into?"),
    ("music", "instrument", "I've started {k} lessons with a teacher named {Name} on Tuesday evenings.",
     "Who is instructing me on the {q}?"),
    ("health", "relative", "Turns out my {k} is allergic to {food}, so we check every label now.",
     "Which ingredient does my {q} have to avoid?"),
    ("travel", "city", "We booked a week in {k} for {month} and we're staying at the {Name} Inn.",
     "Where are we lodging during our trip to {q}?"),
    ("cooking", "dish", "My neighbour {Name} showed me how to make {k} last weekend.",
     "Who taught me to prepare {q}?"),
    ("family", "relative", "For my {k}'s birthday we reserved a table at {Name}'s Bistro.",
     "Which restaurant did we pick to celebrate my {q}'s special day?"),
    ("fitness", "activity", "I signed up for {k} at the {Name} Centre, three mornings a week.",
     "Which gym do I go to for my {q}?"),
    ("books", "relative", "My {k} lent me a novel called {Title} and I can't put it down.",
     "What book did my {q} loan to me?"),
    ("home", "room", "We finally repainted the {k} in {colour} after weeks of testing samples.",
     "Which hue did we go with for the {q} walls?"),
    ("plants", "plant", "My {k} finally flowered once I moved it to the {spot}.",
     "Where did I relocate the {q} to get it to bloom?"),
    ("family", "relative", "I got my {k} a {gift} from {Name} Studio for the holidays.",
     "What present did I buy for my {q} at the end of the year?"),
    ("pets", "animal", "The vet said our {k} should eat food from a brand called {Name} Naturals.",
     "Which label did the animal doctor recommend feeding our {q}?"),
    ("travel", "city", "Flights to {k} are sorted, we're flying with {Name} Air.",
     "Which airline are we taking when we go to {q}?"),
    ("music", "instrument", "I bought a second-hand {k} from a little shop called {Name} Sounds.",
     "Where did I pick up my used {q}?"),
    ("cooking", "dish", "The best {k} I've ever eaten was at a place called {Name} Kitchen.",
     "Which restaurant served me the greatest {q} of my life?"),
)  # fmt: skip

# What a reply on each subject talks about (the frames below put these into sentences), and how a
# user opens a request on it.
TOPICS = {
    "pets": (
        (
            "a rescue animal",
            "the first vet visit",
            "a feeding schedule",
            "litter training",
            "a quiet sleeping corner",
            "vaccinations",
            "a harness and lead",
            "chew toys",
            "grooming",
            "an anxious pet",
            "pet insurance",
            "socialising with other animals",
        ),
        "settle in a new pet",
    ),
    "family": (
        (
            "a family gathering",
            "regular phone calls",
            "a big move",
            "a new job",
            "siblings",
            "grandparents",
            "a surprise party",
            "shared holidays",
            "old family photos",
            "a difficult conversation",
            "birthdays",
            "keeping in touch",
        ),
        "plan something for the family",
    ),
    "music": (
        (
            "daily practice",
            "scales",
            "sight-reading",
            "a metronome",
            "finger exercises",
            "a good teacher",
            "posture",
            "tuning",
            "playing by ear",
            "a first recital",
            "music theory",
            "learning as an adult",
        ),
        "practise more regularly",
    ),
    "health": (
        (
            "food labels",
            "an allergist",
            "a skin-prick test",
            "an epinephrine pen",
            "eating out safely",
            "cross-contamination",
            "a food diary",
            "symptoms",
            "ingredients lists",
            "a reaction",
            "substitutes",
            "telling the restaurant",
        ),
        "deal with a food allergy",
    ),
    "travel": (
        (
            "a packing list",
            "the old town",
            "booking early",
            "a guesthouse",
            "local transport",
            "museums",
            "travel insurance",
            "a day trip",
            "street food",
            "the best season to visit",
            "a walking tour",
            "jet lag",
        ),
        "plan the trip",
    ),
    "cooking": (
        (
            "a recipe",
            "fresh ingredients",
            "a sharp knife",
            "the oven temperature",
            "seasoning",
            "a cast-iron pan",
            "prepping ahead",
            "a family recipe",
            "the dough",
            "leftovers",
            "a dinner party",
            "homemade stock",
        ),
        "cook something new",
    ),
    "fitness": (
        (
            "a warm-up",
            "rest days",
            "a training plan",
            "protein",
            "stretching",
            "a personal trainer",
            "tracking progress",
            "a gym membership",
            "sore muscles",
            "good form",
            "early morning workouts",
            "staying motivated",
        ),
        "get fitter this year",
    ),
    "books": (
        (
            "a reading list",
            "a book club",
            "audiobooks",
            "a long novel",
            "the library",
            "reading before bed",
            "a favourite author",
            "second-hand bookshops",
            "a gripping plot",
            "e-readers",
            "short stories",
            "lending books",
        ),
        "read more",
    ),
    "home": (
        (
            "paint samples",
            "a colour palette",
            "natural light",
            "primer",
            "the ceiling",
            "furniture",
            "a feature wall",
            "brushes and rollers",
            "a small flat",
            "storage",
            "curtains",
            "a weekend project",
        ),
        "redecorate the house",
    ),
    "plants": (
        (
            "watering",
            "sunlight",
            "repotting",
            "drainage",
            "fertiliser",
            "humidity",
            "a windowsill",
            "yellow leaves",
            "pruning",
            "a grow light",
            "houseplants",
            "flowering",
        ),
        "keep the plants alive",
    ),
}
# Sentence frames of a reply: {a}, {b} two things of its subject.
FRAMES = (
    "When it comes to {a}, most people find that a little planning goes a long way.",
    "It also helps to think about {a} early, because {b} is much easier once that is settled.",
    "A common mistake is to leave {a} until the last minute; try to sort it out a few days ahead.",
    "If you are unsure about {a}, start small and see how it goes over the first couple of weeks.",
    "Many people underestimate {a}, but it often makes the biggest difference in the long run.",
    "Here is a simple plan: begin with {a}, then move on to {b} once you feel comfortable.",
    "Don't worry too much about {a}; consistency matters far more than getting every detail right.",
    "You might also ask someone experienced about {a}; they will have practical tips about {b} too.",
    "Keep a short note of how {a} goes each week, so you can see what is working.",
    "Budget a bit of time for {a}, since it tends to take longer than expected.",
    "One thing that works well is pairing {a} with {b}, so each supports the other.",
    "Remember that {a} is different for everyone, so adjust the advice to your own situation.",
    "If {a} feels overwhelming, break it into smaller steps and tackle one each day.",
    "Finally, be patient with {a}: progress is rarely a straight line.",
    "Some people swear by {a}, others by {b}; try both and keep whichever suits you.",
    "The most important part of {a} is simply to start, and to keep going when it gets dull.",
)
ECHOES = (
    "That's lovely news about your {k}!",
    "Thanks for telling me about your {k}.",
    "How exciting, and good to hear about the {k}.",
)
LEAD_INS = ("Quick update from me.", "Some news this week.", "Hope you're well.", "Random thing to share.")
REQUESTS = (
    "Can you help me {goal}?",
    "Any advice on how to {goal}?",
    "I want to {goal}, where do I start?",
    "What's the best way to {goal}?",
)


def locomo_lines(path: Path) -> list[str]:
    """LoCoMo's dialogue lines without speaker names (the user's small talk)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    lines = []
    for conv in raw:
        c = conv["conversation"]
        for key in sorted(k for k in c if k.startswith("session_") and isinstance(c[k], list)):
            lines += [t["text"] for t in c[key] if 30 <= len(t.get("text", "")) <= 300]
    return lines


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        n = "".join(rng.choice(_SYL) for _ in range(rng.choice((2, 3)))).capitalize()
        if n not in used:
            used.add(n)
            return n


def _reply(rng: random.Random, topic: str, length: int) -> str:
    """An assistant reply of about `length` characters on `topic`, in paragraphs of 3-6 sentences."""
    things = TOPICS[topic][0]
    paras: list[str] = []
    total = 0
    while total < length:
        sents = []
        for _ in range(rng.randint(3, 6)):
            a, b = rng.sample(things, 2)
            sents.append(rng.choice(FRAMES).format(a=a, b=b))
        para = " ".join(s[0].upper() + s[1:] for s in sents)
        paras.append(para)
        total += len(para) + 2
    return "\n\n".join(paras)


def _request(rng: random.Random, topic: str) -> str:
    return rng.choice(REQUESTS).format(goal=TOPICS[topic][1])


def build(locomo_path: Path, seed: int = SEED) -> dict:
    """The set: {"description", "seed", "sessions": [...], "questions": [...]} as long_sessions reads it."""
    rng = random.Random(seed)
    small_talk = locomo_lines(locomo_path)
    used_names: set[str] = set()
    # Each fact: a template and a key value no other fact of that template uses.
    free = {k: list(range(len(POOLS[t[1]]))) for k, t in enumerate(TEMPLATES)}
    if sum(len(v) for v in free.values()) < FACTS + NEAR:
        raise ValueError(f"the templates hold fewer than {FACTS + NEAR} distinct questions")
    combos = [(k, v) for k in free for v in free[k]]
    rng.shuffle(combos)
    chosen, spare = combos[:FACTS], combos[FACTS : FACTS + NEAR]
    facts = []
    for k, v in chosen:
        word, para = POOLS[TEMPLATES[k][1]][v]
        slots = {
            "k": word,
            "q": para,
            "Name": _name(rng, used_names),
            "Title": f"The {_name(rng, used_names)} Letters",
            "pron": rng.choice(("him", "her")),
            "job": rng.choice(JOBS),
            "city": rng.choice(CITIES)[0],
            "food": rng.choice(FOODS),
            "month": rng.choice(MONTHS),
            "colour": rng.choice(COLOURS),
            "spot": rng.choice(SPOTS),
            "gift": rng.choice(GIFTS),
        }
        facts.append((k, slots))
    near = [TEMPLATES[k][3].format(q=POOLS[TEMPLATES[k][1]][v][1]) for k, v in spare]
    # Sessions: dates over three years in order; each fact in a random session and exchange, the
    # session then on the fact's subject.
    days = sorted(rng.uniform(0, SPAN_DAYS) for _ in range(SESSIONS))
    pairs = [rng.randint(*PAIRS) for _ in range(SESSIONS)]
    topics = [rng.choice(sorted(TOPICS)) for _ in range(SESSIONS)]
    slots_free = [(s, p) for s in range(SESSIONS) for p in range(pairs[s])]
    placed = dict(zip(rng.sample(slots_free, len(facts)), range(len(facts))))
    sessions, questions = [], []
    for s in range(SESSIONS):
        sid = f"p{s:03d}"
        facts_here = [f for (s2, _), f in placed.items() if s2 == s]
        topic = TEMPLATES[facts[facts_here[0]][0]][0] if facts_here else topics[s]
        turns: list[dict] = []
        for p in range(pairs[s]):
            f = placed.get((s, p))
            if f is not None:
                k, slots = facts[f]
                topic = TEMPLATES[k][0]
                fact = TEMPLATES[k][2].format(**slots)
                user = f"{rng.choice(LEAD_INS)} {fact} {_request(rng, topic)}"
                opening = rng.choice(ECHOES).format(k=slots["k"]) + " "
                questions.append(
                    {
                        "question": TEMPLATES[k][3].format(**slots),
                        "evidence": [f"{sid}:t{len(turns)}"],
                        "sentence": fact,
                        "topic": topic,
                    }
                )
            else:
                user = rng.choice(small_talk) if rng.random() < 0.5 else _request(rng, topic)
                opening = ""
            lo, hi = LONG_REPLY if rng.random() < LONG_SHARE else SHORT_REPLY
            reply = opening + _reply(rng, topic, round(lo * (hi / lo) ** rng.random()))
            turns.append({"id": f"{sid}:t{len(turns)}", "role": "user", "content": user})
            turns.append({"id": f"{sid}:t{len(turns)}", "role": "assistant", "content": reply})
        when = START + timedelta(days=days[s])
        sessions.append({"id": sid, "date": when.replace(microsecond=0).isoformat(), "turns": turns})
    questions += [{"question": q, "evidence": [], "sentence": None, "topic": None} for q in near]
    # Halves: alternate over a seeded shuffle.
    order = list(range(len(questions)))
    rng.shuffle(order)
    for i, j in enumerate(order):
        questions[j]["half"] = "tune" if i % 2 == 0 else "report"
    return {
        "description": f"benchmarks/paraphrase_chat.py, seed {seed} (generated, never committed)",
        "seed": seed,
        "sessions": sessions,
        "questions": questions,
    }


def plain_ranks(doc: dict, embedder, chunked: bool) -> list[list[str]]:
    """The bare model's top ten turns for each question: each turn one vector (cut where the model
    cuts), or with `chunked` each turn as its best chunk of ENGRAM_CHUNK_SIZE characters (the cut
    engram's writes make), a turn taking one place."""
    from engram.core.settings import Settings
    from engram.text.chunking import split_chunks

    from .plain_cosine import PlainCosine

    turns = [t for s in doc["sessions"] for t in s["turns"]]
    if not chunked:
        plain = PlainCosine(embedder, [t["content"] for t in turns], [t["id"] for t in turns])
        return [plain.search(q["question"], 10) for q in doc["questions"]]
    cfg = Settings()
    texts, keys = [], []
    for t in turns:
        for c in split_chunks(t["content"], cfg.chunk_size, cfg.chunk_overlap):
            texts.append(c)
            keys.append(t["id"])
    plain = PlainCosine(embedder, texts, keys)
    out = []
    for q in doc["questions"]:
        seen: list[str] = []
        for key in plain.search(q["question"], 10 * 40):
            if key not in seen:
                seen.append(key)
            if len(seen) == 10:
                break
        out.append(seen)
    return out


# One part of engram's ranking changed at a time, from the defaults (query time: asked of the
# same store; "ingest": a store of its own, as the setting changes what is written or indexed).
COMPONENTS: tuple[tuple[str, dict, dict, bool], ...] = (
    ("defaults", {}, {}, False),
    ("a long turn as its best chunk, uncorrected (chunk_spread 0)", {}, {"chunk_spread": 0.0}, False),
    ("late interaction off", {"late_interaction": False}, {}, False),
    ("late weight 0.2 (2x)", {"late_weight": 0.2}, {}, False),
    ("no decay (floor 1)", {"decay_floor": 1.0}, {}, False),
    ("no relevance floor or coverage gates", {"relevance_cosine": -1.0, "relevance_coverage": 0.0},
     {"hit_share": 0.0, "hit_cosine": -1.0, "hit_coverage": 0.0}, False),
    ("no BM25 in hybrid (w_bm25 0)", {"w_bm25": 0.0}, {}, False),
    ("a turn's BM25 weighed by the query's coverage (turn_lexical_floor 0)", {"turn_lexical_floor": 0.0}, {}, False),
    ("turn_lexical_floor 0.5", {"turn_lexical_floor": 0.5}, {}, False),
    # A store of their own, without the late stage (its token vectors take most of an ingest's
    # time here): compared with the "late interaction off" row.
    ("no neighbour context (window 0), late off", {"context_window": 0, "late_interaction": False}, {}, True),
    ("one memory per turn (no chunks), late off", {"chunk_size": 100_000, "late_interaction": False}, {}, True),
)  # fmt: skip


def _ask(eng, doc: dict, mode: str) -> list[list[str]]:
    from .long_sessions import LIMIT, USER

    return [
        [
            h.memory.provenance[0]
            for h in eng.recall(q["question"], limit=LIMIT, user_id=USER, reinforce=False, mode=mode)
        ]
        for q in doc["questions"]
    ]


def _figures(doc: dict, ranks: list[list[str]]) -> dict:
    """hit@5, hit@10 and long turns in the top 10 (mean), per half; and the share of the
    questions nothing answers that got nothing."""
    long_ids = {t["id"] for s in doc["sessions"] for t in s["turns"] if len(t["content"]) > 1000}
    out = {}
    for half in ("tune", "report", "all"):
        sel = [(q, r) for q, r in zip(doc["questions"], ranks) if q["evidence"] and half in ("all", q["half"])]
        none = [r for q, r in zip(doc["questions"], ranks) if not q["evidence"] and half in ("all", q["half"])]
        n = max(len(sel), 1)
        out[half] = {
            "n": len(sel),
            "hit@5": sum(bool(set(r[:5]) & set(q["evidence"])) for q, r in sel) / n,
            "hit@10": sum(bool(set(r[:10]) & set(q["evidence"])) for q, r in sel) / n,
            "long@10": sum(sum(t in long_ids for t in r[:10]) for _, r in sel) / n,
            "none_empty": sum(not r for r in none) / max(len(none), 1),
        }
    return out


def run_components(doc: dict, embedder, log=print) -> list[dict]:
    """Each of COMPONENTS in hybrid and vector mode, and the bare model whole and chunked."""
    import time
    from dataclasses import replace

    from engram import Settings
    from engram.search.ranking import Weights

    from .long_sessions import _stored

    base = Settings.from_env()
    rows = []
    for chunked in (False, True):
        rows.append({"name": "bare model, " + ("best chunk" if chunked else "whole turn"),
                     "plain": _figures(doc, plain_ranks(doc, embedder, chunked))})  # fmt: skip
        log(rows[-1])
    shared = None
    try:
        for name, overrides, weights, ingest in COMPONENTS:
            settings = replace(base, **overrides)
            t0 = time.perf_counter()
            if ingest or shared is None:
                eng, memories = _stored(doc, settings, embedder)
                if not ingest:
                    shared = eng
            else:
                eng, memories = shared, None
            eng.state.settings = settings
            eng.state.weights = replace(Weights.from_settings(settings), **weights)
            took = time.perf_counter() - t0
            try:
                row = {"name": name, "memories": memories, "ingest_s": round(took, 1) if memories else None}
                for mode in ("hybrid", "vector") + (("bm25",) if name == "defaults" else ()):
                    row[mode] = _figures(doc, _ask(eng, doc, mode))
            finally:
                if eng is not shared:
                    eng.close()
            rows.append(row)
            log(row)
    finally:
        if shared is not None:
            shared.close()
    return rows


def components_markdown(rows: list[dict], half: str) -> str:
    lines = [
        f"| {half} half: hit@5 / hit@10 (long turns in the top 10) | hybrid | vector | bm25 / plain |",
        "|---|---|---|---|",
    ]

    def cell(c: dict | None) -> str:
        return "" if c is None else f"{c[half]['hit@5']:.3f} / {c[half]['hit@10']:.3f} ({c[half]['long@10']:.1f})"

    for r in rows:
        lines.append(f"| {r['name']} | {cell(r.get('hybrid'))} | {cell(r.get('vector'))} | "
                     f"{cell(r.get('bm25') or r.get('plain'))} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from engram import Settings
    from engram.models.embedding import load_embedder

    from . import long_sessions
    from .locomo.run import CachedEmbedder, default_data_path

    ap = argparse.ArgumentParser(prog="python -m benchmarks.paraphrase_chat", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=default_data_path(), help="locomo10.json (small talk)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--embed-cache", type=Path, default=None, help="reuse turn embeddings (speed only)")
    ap.add_argument("--write-set", type=Path, default=None, help="also write the generated set here")
    ap.add_argument("--json", type=Path, default=None, help="write the full result here")
    ap.add_argument("--components", action="store_true", help="one part of the ranking changed at a time")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"error: LoCoMo data not found at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    doc = build(args.data, args.seed)
    if args.write_set:
        args.write_set.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    if not args.components:
        result = long_sessions.run_long_sessions(doc, embed_cache=args.embed_cache)
        print(long_sessions.markdown(result))
    else:
        settings = Settings.from_env()
        embedder = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
        if args.embed_cache is not None:
            embedder = CachedEmbedder(embedder, args.embed_cache)
        try:
            rows = run_components(doc, embedder, log=lambda r: print(json.dumps(r), file=sys.stderr, flush=True))
        finally:
            if isinstance(embedder, CachedEmbedder):
                embedder.save()
        result = {"components": rows}
        for half in ("tune", "report"):
            print(components_markdown(rows, half))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
