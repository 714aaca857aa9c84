"""A long-conversation set at scale (issue 40), generated reproducibly at run time: hundreds of
dated user/assistant sessions, over 5,000 turns, assistant turns of thousands of characters in
which the answer is one sentence, questions about facts the user stated and facts the assistant
stated, and near-topic questions nothing answers.

Nothing of it is committed: the user's small talk is LoCoMo's dialogue lines (read from
../shared at run time, speaker names dropped), the assistant's long replies are paragraphs of
the Python standard library's own documentation (its docstrings and pydoc's reference topics,
as installed), and the facts come from the templates below with made-up names, so no answer is
in any model's training. One seed fixes everything; the same seed and the same Python give the
same set byte for byte.

The set has the shape of tests/data/long_sessions.json and is run by benchmarks.long_sessions
(one memory per turn, `conversation` the session, `created_at` its date), beside the plain
cosine baseline (benchmarks.plain_cosine):

    python -m benchmarks.long_chat [--data ../shared/locomo/locomo10.json] [--embed-cache F] [--reinforce]
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import random
import sys
import sysconfig
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 40
SESSIONS = 440
PAIRS = (5, 7)  # user/assistant exchanges per session, inclusive
FACTS = 300  # answered questions (half stated by the user, half by the assistant)
NEAR = 60  # near-topic questions nothing answers
START = datetime(2022, 1, 10, 9, 0, tzinfo=timezone.utc)
SPAN_DAYS = 3 * 365  # sessions spread over three years
# An assistant reply's length, log-uniform: a tenth of them long (and every reply holding a
# fact), the rest a paragraph or two. Long replies are what the set is about; they are also what
# costs the time to embed, on a shared machine.
LONG_REPLY = (1500, 4000)
SHORT_REPLY = (150, 800)
LONG_SHARE = 0.1

_SYL = (
    "ka",
    "lo",
    "mi",
    "ren",
    "sa",
    "tor",
    "vel",
    "bri",
    "dun",
    "ema",
    "fal",
    "gor",
    "hal",
    "ine",
    "jor",
    "kel",
    "lun",
    "mar",
    "nor",
    "osk",
    "pel",
    "qui",
    "ras",
    "sel",
    "tam",
    "ul",
    "var",
    "wen",
    "yor",
    "zel",
    "ba",
    "cor",
    "dea",
    "fen",
    "gil",
    "han",
)
CITIES = (
    "Lisbon",
    "Porto",
    "Tallinn",
    "Riga",
    "Krakow",
    "Ljubljana",
    "Valencia",
    "Seville",
    "Bologna",
    "Turin",
    "Lyon",
    "Ghent",
    "Bergen",
    "Aarhus",
    "Tampere",
    "Graz",
    "Brno",
    "Kyoto",
    "Osaka",
    "Busan",
    "Hanoi",
    "Cusco",
    "Quito",
    "Montreal",
    "Halifax",
    "Denver",
    "Austin",
    "Portland",
    "Perth",
    "Hobart",
    "Wellington",
    "Nairobi",
    "Accra",
    "Tbilisi",
)
RELATIVES = (
    "sister",
    "brother",
    "cousin",
    "aunt",
    "uncle",
    "niece",
    "nephew",
    "mother",
    "father",
    "grandmother",
    "grandfather",
    "best friend",
    "neighbour",
    "roommate",
    "sister-in-law",
    "brother-in-law",
    "stepdad",
    "godmother",
)
ANIMALS = (
    "dog",
    "cat",
    "rabbit",
    "parrot",
    "tortoise",
    "hamster",
    "ferret",
    "gecko",
    "canary",
    "goldfish",
    "guinea pig",
    "horse",
    "pony",
    "cockatiel",
    "iguana",
    "hedgehog",
)
INSTRUMENTS = (
    "piano",
    "cello",
    "violin",
    "ukulele",
    "trumpet",
    "saxophone",
    "banjo",
    "harp",
    "flute",
    "clarinet",
    "accordion",
    "drums",
    "mandolin",
    "oboe",
    "bass guitar",
)
GENRES = (
    "science fiction",
    "historical fiction",
    "mystery",
    "fantasy",
    "poetry",
    "biography",
    "travel writing",
    "horror",
    "romance",
    "philosophy",
    "economics",
    "graphic novel",
    "military history",
    "nature writing",
    "true crime",
    "cookbook",
)
DISHES = (
    "ramen",
    "paella",
    "dumplings",
    "tacos",
    "pho",
    "risotto",
    "curry",
    "falafel",
    "pierogi",
    "sushi",
    "goulash",
    "laksa",
    "empanadas",
    "moussaka",
    "bibimbap",
    "gnocchi",
)
PLANTS = (
    "fiddle-leaf fig",
    "monstera",
    "snake plant",
    "orchid",
    "basil",
    "rosemary",
    "fern",
    "bonsai",
    "cactus",
    "peace lily",
    "pothos",
    "lavender",
    "bamboo palm",
    "jade plant",
)
EXERCISES = (
    "squats",
    "lunges",
    "push-ups",
    "deadlifts",
    "pull-ups",
    "planks",
    "burpees",
    "kettlebell swings",
    "step-ups",
    "dips",
    "rows",
    "bridges",
    "calf raises",
)
TOOLS = (
    "webpack",
    "gradle",
    "maven",
    "pytest",
    "nginx",
    "postgres",
    "redis",
    "docker",
    "terraform",
    "ansible",
    "jenkins",
    "kafka",
    "celery",
    "gunicorn",
    "elasticsearch",
)
COLOURS = ("red", "blue", "green", "silver", "black", "white", "orange", "yellow", "grey", "teal")
JOBS = (
    "nurse",
    "architect",
    "data analyst",
    "chef",
    "teacher",
    "pilot",
    "carpenter",
    "lawyer",
    "pharmacist",
    "park ranger",
    "translator",
    "sound engineer",
    "welder",
    "librarian",
)
FOODS = (
    "peanuts",
    "shellfish",
    "sesame",
    "kiwi",
    "mustard",
    "celery",
    "lupin",
    "buckwheat",
    "mango",
    "walnuts",
    "soy",
    "strawberries",
    "avocado",
    "oats",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

# (role that states it, key slot, fact, question, near-topic question and the user's lead-in,
# topic; for a fact the user states, the opening of the assistant's reply to it). {x} slots are
# filled from the pools in _slots; the question names the key slot, never the answer; the
# near-topic question swaps the key for a value no fact uses, so nothing answers it. The reply
# opens as an assistant's does, on the user's subject and in the user's words but without the
# answer: the reply, a long text on the same subject right after it, competes with the turn that
# holds the answer, as it does in a real chat.
TEMPLATES = (
    (
        "user",
        "animal",
        "Our {animal} is called {Name}; we adopted {pron} from a shelter in {city} two winters ago.",
        "What is the name of my {animal}?",
        "I keep wondering whether a {animal} would like a bigger enclosure.",
        "pets",
        "A {animal} from a shelter can take a few weeks to settle in, so be patient with {pron}.",
    ),
    (
        "user",
        "relative",
        "My {relative} moved to {city} last {month} to work as a {job}.",
        "Which city did my {relative} move to?",
        "My {relative} has been thinking about changing jobs.",
        "family",
        "Moving for a new job as a {job} is a big step for your {relative}, and the first months are the hardest.",
    ),
    (
        "user",
        "instrument",
        "I've been learning the {instrument} with a teacher called {Name} every {weekday} evening.",
        "Who teaches me the {instrument}?",
        "Do you think the {instrument} is hard to learn as an adult?",
        "music",
        "Weekly lessons are the surest way to learn the {instrument}, and {weekday} evenings make a good habit.",
    ),
    (
        "user",
        "relative",
        "My {relative} and I found out last month that we are both allergic to {food}, so we read every label now.",
        "What did my {relative} and I find out we are allergic to?",
        "Any tips for eating out with a food allergy?",
        "health",
        "Finding out about a food allergy as an adult is common, and reading labels is exactly right for you "
        "and your {relative}.",
    ),
    (
        "user",
        "city",
        "I finally bought a {colour} {Name} hatchback from a dealer in {city} after saving for two years.",
        "What car did I buy in {city}?",
        "Is it worth buying an extended warranty on a used car?",
        "cars",
        "Congratulations on the new car from {city}! Saving for two years takes real discipline.",
    ),
    (
        "user",
        "city",
        "For our anniversary we stayed at a tiny guesthouse in {city} called {Name} House.",
        "Where did we stay for our anniversary in {city}?",
        "What should I pack for a long weekend in {city}?",
        "travel",
        "An anniversary in {city} sounds wonderful; small guesthouses are often the stays people remember.",
    ),
    (
        "user",
        "relative",
        "My {relative} just turned {n}0 and we threw the party at a bar called {Name}'s.",
        "Where did we hold my {relative}'s birthday party?",
        "What do you give someone for a big birthday?",
        "family",
        "Happy {n}0th to your {relative}! A party at a bar is a fun way to mark the day.",
    ),
    (
        "user",
        "plant",
        "I repotted my {plant} into a clay pot I bought at {Name} Market.",
        "Where did I buy the new pot for my {plant}?",
        "Should I repot my {plant} in spring or autumn?",
        "plants",
        "Repotting a {plant} into clay helps its roots breathe, since clay dries faster than plastic.",
    ),
    (
        "user",
        "dish",
        "My neighbour {Name} taught me to cook {dish} last weekend.",
        "Who taught me to cook {dish}?",
        "What should I serve with {dish}?",
        "food",
        "Learning {dish} from a neighbour is the best way to pick up a recipe; home cooks know the tricks.",
    ),
    (
        "user",
        "tool",
        "At work I look after the {tool} setup for a team called {Name}.",
        "What is the team called whose {tool} setup I look after?",
        "How do you keep {tool} upgrades painless?",
        "code",
        "Looking after the {tool} setup for a whole team is a lot of responsibility.",
    ),
    (
        "user",
        "genre",
        "My book club is reading a {genre} novel called {Title} this month.",
        "Which {genre} novel is my book club reading?",
        "How do you run a good book club discussion?",
        "books",
        "A {genre} novel is a good pick for a book club; it gives everyone something to talk about.",
    ),
    (
        "assistant",
        "relative",
        "For your {relative}'s birthday, a voucher from {Name} Studio would make a thoughtful gift.",
        "What gift did you suggest for my {relative}'s birthday?",
        "What do you give someone for a big birthday?",
        "family",
    ),
    (
        "assistant",
        "animal",
        "For the {animal}, a brand called {Name} Naturals makes the food most vets suggest.",
        "Which food brand did you suggest for my {animal}?",
        "What should I feed a {animal}?",
        "pets",
    ),
    (
        "assistant",
        "instrument",
        "For the {instrument}, the {Name} method book is the gentlest start for adults.",
        "Which method book did you suggest for the {instrument}?",
        "Do you think the {instrument} is hard to learn as an adult?",
        "music",
    ),
    (
        "assistant",
        "food",
        "To avoid {food}, look for the {Name} certification mark on the packaging.",
        "Which certification mark did you say to look for to avoid {food}?",
        "Any tips for eating out with a food allergy?",
        "health",
    ),
    (
        "assistant",
        "genre",
        "If you enjoy {genre}, I'd recommend {Title} by {Name}; it is short and very readable.",
        "Which {genre} book did you recommend to me?",
        "Can you suggest a {genre} book for a long flight?",
        "books",
    ),
    (
        "assistant",
        "dish",
        "For {dish}, try {Name} on {Street} Street; locals say it is the best in town.",
        "Which place did you recommend for {dish}?",
        "Where can I get good {dish} around here?",
        "food",
    ),
    (
        "assistant",
        "plant",
        "Water your {plant} every {n} days and keep it out of direct afternoon sun.",
        "How often did you say I should water my {plant}?",
        "My {plant} has yellow leaves, what am I doing wrong?",
        "plants",
    ),
    (
        "assistant",
        "exercise",
        "Start with {n} sets of {exercise} on Mondays and Thursdays, then add one set a fortnight.",
        "How many sets of {exercise} did you suggest I start with?",
        "How can I make {exercise} less boring?",
        "fitness",
    ),
    (
        "assistant",
        "tool",
        "Set the {tool} timeout option to {n}0 seconds so the nightly job stops failing.",
        "What timeout did you suggest for {tool}?",
        "Why does {tool} keep running out of memory?",
        "code",
    ),
    (
        "assistant",
        "city",
        "In {city}, I'd suggest the {Name} Hotel in the old harbour district; it is quiet and central.",
        "Which hotel did you suggest for my stay in {city}?",
        "What should I pack for a long weekend in {city}?",
        "travel",
    ),
)
POOLS = {
    "animal": ANIMALS,
    "relative": RELATIVES,
    "instrument": INSTRUMENTS,
    "food": FOODS,
    "colour": COLOURS,
    "city": CITIES,
    "genre": GENRES,
    "dish": DISHES,
    "plant": PLANTS,
    "exercise": EXERCISES,
    "tool": TOOLS,
}
LEAD_INS = {
    "pets": ("We've had a busy month with the animals at home.", "The vet visit went fine this week."),
    "family": ("Family news this week, bear with me.", "I had a long call with the family yesterday."),
    "music": ("I'm trying to practise more regularly.", "Music has been my escape lately."),
    "health": ("I've had a few health surprises recently.", "Diet question for you."),
    "cars": ("Big purchase news!", "I've been commuting a lot more."),
    "travel": ("Planning a trip, can you help?", "We're back from a lovely weekend away."),
    "books": ("I need something new to read.", "My reading list is empty again."),
    "food": ("I'm hungry and out of ideas.", "Where should we eat this weekend?"),
    "plants": ("My flat is turning into a jungle.", "Plant question again, sorry."),
    "fitness": ("I want to get stronger this year.", "Can you help with a workout plan?"),
    "code": ("Our nightly build broke again.", "I'm debugging a flaky job at work."),
}
# What an assistant says around a fact of the topic (and in replies on the topic with no fact).
TOPIC_SENTENCES = {
    "pets": "Animals settle best with a steady routine, regular meals and a quiet corner of their own.",
    "family": "Moving somewhere new is a big change, and regular calls help everyone adjust.",
    "music": "Short daily practice beats one long session a week for almost every instrument.",
    "health": "An allergist can confirm a diagnosis with a skin-prick or blood test.",
    "cars": "A pre-purchase inspection by an independent mechanic is always worth the fee.",
    "travel": "Booking a few weeks ahead usually gets you a better room for the same price.",
    "books": "Reading a little every night is the easiest way to finish more books.",
    "food": "Small family-run places often have the most authentic menus.",
    "plants": "Most houseplants die from too much water rather than too little.",
    "fitness": "Progress comes from adding load slowly and resting well between sessions.",
    "code": "Flaky jobs are usually a timeout, a race or an exhausted resource.",
}


@functools.cache
def stdlib_paragraphs() -> tuple[str, ...]:
    """Paragraphs of the installed standard library's own documentation: module, class and
    function docstrings (read with ast, nothing imported) and pydoc's reference topics."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "test", "tests", "idle_test", "idlelib", "lib2to3"}
    docs: list[str] = []
    for p in sorted(root.rglob("*.py")):
        if skip.intersection(p.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(p.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                d = ast.get_docstring(node)
                if d:
                    docs.append(d)
    try:
        from pydoc_data.topics import topics

        docs += [topics[k] for k in sorted(topics)]
    except ImportError:  # pragma: no cover - a Python built without pydoc_data
        pass
    out = []
    for d in docs:
        for para in d.split("\n\n"):
            text = " ".join(para.split())
            # Prose only: a paragraph of words, not a signature, table or code listing.
            prose = sum(c.isalpha() for c in text) > 0.7 * len(text)
            if len(text) >= 120 and text[0].isupper() and ">>>" not in text and prose:
                out.append(text)
    return tuple(out)


def locomo_lines(path: Path) -> list[str]:
    """LoCoMo's dialogue lines without speaker names (the user's small talk)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    lines = []
    for conv in raw:
        c = conv["conversation"]
        for key in sorted(k for k in c if k.startswith("session_") and isinstance(c[k], list)):
            lines += [t["text"] for t in c[key] if len(t.get("text", "")) >= 30]
    return lines


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        n = "".join(rng.choice(_SYL) for _ in range(rng.choice((2, 3)))).capitalize()
        if n not in used:
            used.add(n)
            return n


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**slots)


def _reply(rng: random.Random, paras: tuple[str, ...], length: int, inserts: list[str]) -> tuple[str, list[str]]:
    """An assistant reply of about `length` characters: consecutive paragraphs from a random place
    in the documentation, the `inserts` sentences put at random paragraph places."""
    i = rng.randrange(len(paras))
    body: list[str] = []
    while sum(len(p) + 2 for p in body) < length:
        body.append(paras[i % len(paras)])
        i += 1
    text = "\n\n".join(body)
    cut = text.rfind(". ", 0, int(length * 1.3))
    if len(text) > length * 1.3 and cut > length // 2:  # a paragraph longer than asked: cut after a sentence
        body = text[: cut + 1].split("\n\n")
    for s in inserts:
        at = rng.randrange(len(body) + 1)
        # Inside a paragraph or as its own: replies put the one useful sentence anywhere.
        if at < len(body) and rng.random() < 0.5:
            body[at] = f"{body[at]} {s}"
        else:
            body.insert(at, s)
    return "\n\n".join(body), body


def build(locomo_path: Path, seed: int = SEED) -> dict:
    """The set: {"description", "seed", "sessions": [...], "questions": [...]} as long_sessions reads it."""
    rng = random.Random(seed)
    paras = stdlib_paragraphs()
    small_talk = locomo_lines(locomo_path)
    used_names: set[str] = set()
    used_keys: dict[tuple[int, str], set[str]] = {}
    # The facts first: each a template and a key value no other fact of the template uses.
    facts = []
    for i in range(FACTS):
        role = "user" if i % 2 == 0 else "assistant"
        choices = [k for k, t in enumerate(TEMPLATES) if t[0] == role]
        if all(v in used_keys.get((k, TEMPLATES[k][1]), set()) for k in choices for v in POOLS[TEMPLATES[k][1]]):
            raise ValueError(f"the templates hold fewer than {FACTS} distinct {role} questions")
        while True:
            k = rng.choice(choices)
            key = TEMPLATES[k][1]
            taken = used_keys.setdefault((k, key), set())
            free = [v for v in POOLS[key] if v not in taken]
            if free:
                break
        value = rng.choice(free)
        taken.add(value)
        slots = {name: rng.choice(pool) for name, pool in POOLS.items()}
        slots.update(
            {
                key: value,
                "Name": _name(rng, used_names),
                "Title": f"The {_name(rng, used_names)} Letters",
                "Street": _name(rng, used_names),
                "pron": rng.choice(("him", "her")),
                "month": rng.choice(MONTHS),
                "weekday": rng.choice(WEEKDAYS),
                "job": rng.choice(JOBS),
                "n": str(rng.randint(2, 9)),
            }
        )
        facts.append((k, slots))
    # Near-topic questions: a template's question about a key value no fact of it uses.
    unused = sorted(
        {
            _fill(t[3], {t[1]: v})
            for k, t in enumerate(TEMPLATES)
            for v in POOLS[t[1]]
            if v not in used_keys.get((k, t[1]), set())
        }
        - {_fill(TEMPLATES[k][3], s) for k, s in facts}
    )
    near = rng.sample(unused, min(NEAR, len(unused)))
    # Sessions: dates over three years in order; each fact in a random session and exchange.
    days = sorted(rng.uniform(0, SPAN_DAYS) for _ in range(SESSIONS))
    pairs = [rng.randint(*PAIRS) for _ in range(SESSIONS)]
    slots_free = [(s, p) for s in range(SESSIONS) for p in range(pairs[s])]
    placed = dict(zip(rng.sample(slots_free, len(facts)), range(len(facts))))
    topics = [rng.choice(sorted(LEAD_INS)) for _ in range(SESSIONS)]
    sessions, questions = [], []
    for s in range(SESSIONS):
        sid = f"c{s:03d}"
        turns = []
        for p in range(pairs[s]):
            f = placed.get((s, p))
            user = rng.choice(small_talk)
            inserts: list[str] = []
            opening = None
            if f is not None:
                k, slots = facts[f]
                role, _, fact_t, q_t, lead_t, topic, *echo = TEMPLATES[k]
                fact = _fill(fact_t, slots)
                lead = f"{rng.choice(LEAD_INS[topic])} {_fill(lead_t, slots)}"
                if role == "user":
                    user = f"{lead} {fact} {user}" if rng.random() < 0.5 else f"{user} {fact} {lead}"
                    opening = f"{_fill(echo[0], slots)} {TOPIC_SENTENCES[topic]}"
                else:
                    user = lead
                    inserts = [fact, TOPIC_SENTENCES[topic]]
                who = len(turns) + (0 if role == "user" else 1)
                questions.append(
                    {
                        "question": _fill(q_t, slots),
                        "evidence": [f"{sid}:t{who}"],
                        "sentence": fact,
                        "role": role,
                        "topic": topic,
                        "key": slots[TEMPLATES[k][1]],
                    }
                )
            elif rng.random() < 0.3:
                inserts = [TOPIC_SENTENCES[topics[s]]]  # on the session's topic, answering nothing
            lo, hi = LONG_REPLY if f is not None or rng.random() < LONG_SHARE else SHORT_REPLY
            length = round(lo * (hi / lo) ** rng.random())
            reply, _ = _reply(rng, paras, length, inserts)
            if opening is not None:
                reply = f"{opening}\n\n{reply}"
            turns.append({"id": f"{sid}:t{len(turns)}", "role": "user", "content": user})
            turns.append({"id": f"{sid}:t{len(turns)}", "role": "assistant", "content": reply})
        when = START + timedelta(days=days[s])
        sessions.append({"id": sid, "date": when.replace(microsecond=0).isoformat(), "turns": turns})
    questions += [
        {"question": q, "evidence": [], "sentence": None, "role": None, "topic": None, "key": None} for q in near
    ]
    # Halves: alternate over a seeded shuffle, so each half has both kinds of fact and of question.
    order = list(range(len(questions)))
    rng.shuffle(order)
    for i, j in enumerate(order):
        questions[j]["half"] = "tune" if i % 2 == 0 else "report"
    return {
        "description": f"benchmarks/long_chat.py, seed {seed} (generated, never committed)",
        "seed": seed,
        "sessions": sessions,
        "questions": questions,
    }


def main(argv: list[str] | None = None) -> int:
    from . import long_sessions
    from .locomo.run import default_data_path

    ap = argparse.ArgumentParser(prog="python -m benchmarks.long_chat", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=default_data_path(), help="locomo10.json (small talk)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--embed-cache", type=Path, default=None, help="reuse turn embeddings (speed only)")
    ap.add_argument("--write-set", type=Path, default=None, help="also write the generated set here")
    ap.add_argument("--json", type=Path, default=None, help="write the full result (per question) here")
    ap.add_argument("--reinforce", action="store_true", help="reinforce strong hits, as MCP recall does")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"error: LoCoMo data not found at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    doc = build(args.data, args.seed)
    if args.write_set:
        args.write_set.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    result = long_sessions.run_long_sessions(doc, embed_cache=args.embed_cache, reinforce=args.reinforce)
    print(long_sessions.markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
