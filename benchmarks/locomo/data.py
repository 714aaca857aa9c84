"""LoCoMo loading: conversations as dated turns, questions with normalised evidence."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
SCORED_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)

_MONTHS = {
    name: i
    for i, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
# "1:56 pm on 8 May, 2023"
_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE,
)
# "D11:26", and the stray-colon form "D:11:26"; leading zeros are dropped by int().
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    blip_caption: str | None
    when: datetime
    session: int

    @property
    def content(self) -> str:
        """The memory text: who said it, plus the caption of a shared image."""
        s = f"{self.speaker}: {self.text}"
        if self.blip_caption:
            s += f" [shared image: {self.blip_caption}]"
        return s


@dataclass(frozen=True)
class Session:
    number: int
    when: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    conversation: int
    index: int
    question: str
    answer: str | None
    adversarial_answer: str | None
    category: int
    evidence: tuple[str, ...]
    raw_evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    index: int
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(t for s in self.sessions for t in s.turns)

    @property
    def last_time(self) -> datetime:
        return self.sessions[-1].when


def parse_date(text: str) -> datetime:
    """Parse LoCoMo's session stamp ("1:56 pm on 8 May, 2023") as a UTC datetime."""
    m = _DATE.match(text)
    if not m:
        raise ValueError(f"unrecognised LoCoMo date {text!r}")
    hour, minute, half, day, month_name, year = m.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unrecognised month in LoCoMo date {text!r}")
    h = int(hour)
    if not 1 <= h <= 12:
        raise ValueError(f"hour out of range in LoCoMo date {text!r}")
    h = h % 12 + (12 if half.lower() == "p" else 0)
    return datetime(int(year), month, int(day), h, int(minute), tzinfo=timezone.utc)


def normalize_dia_id(token: str) -> str | None:
    """One id in canonical form ("D:11:26" -> "D11:26", "D30:05" -> "D30:5"); None if it is not one."""
    m = _DIA_ID.fullmatch(token.strip())
    if not m:
        return None
    return f"D{int(m.group(1))}:{int(m.group(2))}"


def normalize_evidence(raw: Iterable[str]) -> tuple[str, ...]:
    """Canonical, de-duplicated evidence ids.

    As released, one string may hold several ids ("D8:6; D9:17", "D9:1 D4:4"),
    and a bare "D" carries no id at all and is dropped.
    """
    out: list[str] = []
    for item in raw:
        for token in re.split(r"[;,\s]+", str(item)):
            dia = normalize_dia_id(token) if token else None
            if dia is not None and dia not in out:
                out.append(dia)
    return tuple(out)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _conversation(index: int, raw: dict[str, Any]) -> Conversation:
    conv = raw["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    sessions = []
    for n in numbers:
        dialog = conv[f"session_{n}"]
        if not dialog:
            continue
        when = parse_date(conv[f"session_{n}_date_time"])
        turns = []
        for t in dialog:
            dia = normalize_dia_id(t["dia_id"])
            if dia is None:
                raise ValueError(f"conversation {index}: bad dialog id {t['dia_id']!r}")
            turns.append(
                Turn(
                    dia_id=dia,
                    speaker=t["speaker"],
                    text=t["text"],
                    blip_caption=t.get("blip_caption") or None,
                    when=when,
                    session=n,
                )
            )
        sessions.append(Session(number=n, when=when, turns=tuple(turns)))
    questions = tuple(
        Question(
            conversation=index,
            index=qi,
            question=q["question"],
            answer=_text(q.get("answer")),
            adversarial_answer=_text(q.get("adversarial_answer")),
            category=int(q["category"]),
            evidence=normalize_evidence(q.get("evidence") or ()),
            raw_evidence=tuple(str(e) for e in q.get("evidence") or ()),
        )
        for qi, q in enumerate(raw["qa"])
    )
    return Conversation(
        index=index,
        sample_id=str(raw.get("sample_id", f"conv-{index}")),
        speakers=(conv["speaker_a"], conv["speaker_b"]),
        sessions=tuple(sessions),
        questions=questions,
    )


def load(path: str | Path) -> list[Conversation]:
    """Read locomo10.json into conversations, in file order."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of conversations")
    return [_conversation(i, c) for i, c in enumerate(raw)]
