"""Optional answer stage: an OpenAI-compatible model answers from recalled memories; LoCoMo F1.

Scoring follows LoCoMo's task_eval/evaluation.py: lowercase, drop commas and
punctuation and the words a/an/the/and, Porter-stem, token F1. Multi-hop
answers are split on commas and scored part by part; an open-domain answer
key keeps only the part before ";"; an adversarial question is correct when
the reply says the thing is not mentioned.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx
import snowballstemmer

from .data import CATEGORIES, SCORED_CATEGORIES, Question

ENV_BASE_URL = "ENGRAM_BENCH_BASE_URL"
ENV_MODEL = "ENGRAM_BENCH_MODEL"
ENV_API_KEY = "ENGRAM_BENCH_API_KEY"
NOT_MENTIONED = "Not mentioned in the conversation"

QA_PROMPT = (
    "Based on the above context, write an answer in the form of a short phrase for the "
    "following question. Answer with exact words from the context whenever possible.\n\n"
    "Question: {} Short answer:"
)
QA_PROMPT_CAT_5 = "Based on the above context, answer the following question.\n\nQuestion: {} Short answer:"
TEMPORAL_HINT = " Use DATE of CONVERSATION to answer with an approximate date."

_stemmer = snowballstemmer.stemmer("porter")
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    s = str(s).replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _tokens(s: str) -> list[str]:
    return [_stemmer.stemWord(w) for w in normalize_answer(s).split()]


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 between normalised, stemmed answers."""
    pred, ref = _tokens(prediction), _tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1_multi(prediction: str, gold: str) -> float:
    """Multi-hop F1: each comma-separated gold part takes its best-matching predicted part."""
    preds = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(f1_score(p, g) for p in preds) for g in golds) / len(golds)


def says_not_mentioned(prediction: str) -> bool:
    low = prediction.lower()
    return "no information available" in low or "not mentioned" in low


def score_answer(prediction: str, question: Question) -> float:
    if question.category == 5:
        return 1.0 if says_not_mentioned(prediction) else 0.0
    gold = question.answer or ""
    if question.category == 3:
        gold = gold.split(";")[0].strip()
    if question.category == 1:
        return f1_multi(prediction, gold)
    return f1_score(prediction, gold)


def _options(question: Question) -> tuple[str, str]:
    """Adversarial questions are asked as a choice; the order is fixed per question, not random."""
    other = question.adversarial_answer or question.answer or ""
    flip = hashlib.sha256(question.question.encode()).digest()[0] & 1
    return (NOT_MENTIONED, other) if flip else (other, NOT_MENTIONED)


def resolve_choice(reply: str, options: tuple[str, str]) -> str:
    """Map a bare "a"/"(b)" reply to the option it picks; other replies stand as written."""
    r = reply.strip().lower()
    if r in ("a", "(a)", "a)", "a."):
        return options[0]
    if r in ("b", "(b)", "b)", "b."):
        return options[1]
    return reply


def format_when(when: datetime) -> str:
    """The date as LoCoMo writes it, e.g. "1:56 pm on 8 May, 2023"."""
    hour = when.hour % 12 or 12
    half = "am" if when.hour < 12 else "pm"
    return f"{hour}:{when.minute:02d} {half} on {when.day} {when:%B}, {when.year}"


@dataclass(frozen=True)
class ContextItem:
    when: datetime
    content: str


def build_prompt(
    question: Question, speakers: tuple[str, str], context: Sequence[ContextItem]
) -> tuple[str, tuple[str, str] | None]:
    """The prompt, and for an adversarial question the (a), (b) options it offers."""
    lines = "\n".join(f"{format_when(c.when)}: {c.content}" for c in context)
    head = (
        f"Below are excerpts from a conversation between two people: {speakers[0]} and "
        f"{speakers[1]}. Each line starts with the date it was said.\n\n{lines}\n\n"
    )
    if question.category == 5:
        options = _options(question)
        q = f"{question.question} Select the correct answer: (a) {options[0]} (b) {options[1]}."
        return head + QA_PROMPT_CAT_5.format(q), options
    q = question.question + (TEMPORAL_HINT if question.category == 2 else "")
    return head + QA_PROMPT.format(q), None


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str
    api_key: str


def endpoint_from_env(env: Mapping[str, str] | None = None) -> tuple[Endpoint | None, str]:
    """The configured endpoint, or None and the reason the stage is skipped."""
    env = os.environ if env is None else env
    for name in (ENV_API_KEY, ENV_BASE_URL, ENV_MODEL):
        if not env.get(name):
            return None, f"answer stage skipped: no {name}"
    return Endpoint(env[ENV_BASE_URL].rstrip("/"), env[ENV_MODEL], env[ENV_API_KEY]), ""


def ask(client: httpx.Client, endpoint: Endpoint, prompt: str) -> str:
    """One chat completion; returns the reply text."""
    r = client.post(
        f"{endpoint.base_url}/chat/completions",
        headers={"Authorization": f"Bearer {endpoint.api_key}"},
        json={
            "model": endpoint.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 64,
        },
    )
    r.raise_for_status()
    return (r.json()["choices"][0]["message"]["content"] or "").strip()


@dataclass(frozen=True)
class AnswerItem:
    question: Question
    speakers: tuple[str, str]
    context: tuple[ContextItem, ...]


def run_answers(
    items: Sequence[AnswerItem],
    endpoint: Endpoint,
    client: httpx.Client | None = None,
    on_done: Callable[[], None] | None = None,
) -> dict:
    """Answer every item and return F1 overall (categories 1-4) and by category."""
    own = client is None
    client = client or httpx.Client(timeout=60.0)
    scored: list[tuple[int, float]] = []
    errors = 0
    try:
        for item in items:
            prompt, options = build_prompt(item.question, item.speakers, item.context)
            try:
                reply = ask(client, endpoint, prompt)
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError):
                # A failed call scores 0 and is counted rather than ending the run.
                reply, errors = "", errors + 1
            if options is not None:
                reply = resolve_choice(reply, options)
            scored.append((item.question.category, score_answer(reply, item.question)))
            if on_done:
                on_done()
    finally:
        if own:
            client.close()

    def mean(vals: list[float]) -> float | None:
        return sum(vals) / len(vals) if vals else None

    overall = [v for c, v in scored if c in SCORED_CATEGORIES]
    by_category = {}
    for cat, name in CATEGORIES.items():
        vals = [v for c, v in scored if c == cat]
        if vals:
            key = "accuracy" if cat == 5 else "f1"
            by_category[str(cat)] = {"name": name, key: mean(vals), "n": len(vals)}
    return {
        "model": endpoint.model,
        "overall_1_4": {"f1": mean(overall), "n": len(overall)},
        "by_category": by_category,
        "errors": errors,
    }
