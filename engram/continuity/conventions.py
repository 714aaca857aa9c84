"""Conventions the user states in passing, kept as facts of the project and given back when they apply.

`capture_conventions` reads prompts (engram.text.convention_sentences picks the sentences) and stores each
sentence through the normal write path: a restatement reinforces the memory it restates, a
correction replaces it, and each belongs to the project it was said in (never to none: a
convention of one repository must not reach another). A sentence said as standing ("always",
"from now on", "in this repo", "we use") is a fact tagged `convention`; a rule said once without
such a cue (a request that sets a rule, a decision, "X should ...") is a candidate, tagged
`convention` and `convention-candidate`: searchable and listed with what was captured, never
injected, until it is confirmed (engram.continuity.keeping drops the candidate tag): said again in
another session, said again as standing, or kept by the user. Both carry `auto-capture` (every
capture's mark) and metadata.captured = "auto".
A short answer that picks an option the agent offered ("A.", "yes do option 1") is stored as the
decision it makes, worded from the option (engram.text.option_picks): standing when the agent's
question asked how the project should be, else a candidate (a menu of this task's next steps).
`project_conventions` lists a project's most used conventions (session start); `conventions_for_prompt`
the ones a prompt is close to (per-prompt injection).

Plain functions over an Engram (typed Any: this layer sits below the facade), as engram.workflows.lifecycle.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from engram.core.types import AUTO_CAPTURE_TAG, CONVENTION_TAG, EngramError, Memory, Scope
from engram.text.convention_sentences import topics_of
from engram.text.option_picks import OFFERED_CHARS, prompt_statements

__all__ = [
    "CANDIDATE_TAG",
    "CONVENTION_TAG",
    "Conventions",
    "capture_conventions",
    "conventions_for_prompt",
    "is_captured_convention",
    "project_conventions",
    "statements_said",
]

CANDIDATE_TAG = "convention-candidate"
CONVENTION_IMPORTANCE = 0.6  # above a plain fact's 0.5: the user said it as a rule of the project
MAX_PROMPTS = 500
MAX_PROMPT_CHARS = 20_000
KNOWN_SCANNED = 500  # the project's captured conventions read for what was already taken in
# A strong recall hit is a convention for the prompt when it is this close in meaning (cosine above
# the background), or STRONG_CAL close and about a subject the prompt names: below, a shared word
# ("decimal", "print") brought rules about something else (benchmarks/conventions_noise.py).
CLOSE_CAL = 0.35
STRONG_CAL = 0.25


_MARK = re.compile(r"^said in (.+) #[0-9a-f]{12}$")


def _sessions(provenance: Any) -> set[str]:
    """The sessions whose prompts said a captured convention (from the marks _mark leaves)."""
    return {m.group(1) for p in provenance for m in [_MARK.match(p)] if m}


def _mark(session_id: str | None, sentence: str) -> str:
    """The provenance a sentence captured in a session leaves on its memory: the same sentence
    captured again from the same session (a later checkpoint rereads the whole transcript) is
    recognised and not counted twice."""
    words = re.sub(r"[\W_]+", " ", sentence.casefold()).strip()
    return f"said in {session_id or 'a session'} #{hashlib.sha256(words.encode()).hexdigest()[:12]}"


def _check_prompts(prompts: Any) -> list[str]:
    if isinstance(prompts, str):
        prompts = [prompts]
    if not isinstance(prompts, list | tuple):
        raise EngramError(f"prompts must be a list of strings; got {type(prompts).__name__}")
    if len(prompts) > MAX_PROMPTS:
        raise EngramError(f"prompts holds at most {MAX_PROMPTS} prompts; got {len(prompts)}")
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise EngramError(f"prompts[{i}] must be a string; got {type(p).__name__}")
    return [p[:MAX_PROMPT_CHARS] for p in prompts]


def _check_answers(answers: Any) -> list[tuple[str, str]]:
    if answers is None:
        return []
    if not isinstance(answers, list | tuple):
        raise EngramError(f"answers must be a list of {{prompt, offered}} objects; got {type(answers).__name__}")
    if len(answers) > MAX_PROMPTS:
        raise EngramError(f"answers holds at most {MAX_PROMPTS} items; got {len(answers)}")
    out = []
    for i, a in enumerate(answers):
        if not isinstance(a, dict) or not isinstance(a.get("prompt"), str) or not isinstance(a.get("offered"), str):
            raise EngramError(f"answers[{i}] must be an object with prompt and offered strings")
        out.append((a["prompt"][:MAX_PROMPT_CHARS], a["offered"][-OFFERED_CHARS:]))
    return out


def statements_said(prompts: Sequence[str], answers: Sequence[tuple[str, str]] = ()) -> dict[str, bool]:
    """Each statement the prompts make (and the answers, each a prompt with the agent's message
    it answers), with whether any saying of it was standing: what capture stores."""
    said: dict[str, bool] = {}
    for prompt, offered in [*((p, "") for p in prompts), *answers]:
        for st in prompt_statements(prompt, offered):
            said[st.text] = said.get(st.text, False) or st.standing
    return said


def _known_marks(eng: Any, user: str | None, project: str) -> set[str]:
    page = eng.list_memories(tags=[CONVENTION_TAG], in_project=project, status="any", limit=KNOWN_SCANNED, user_id=user)
    return {p for m in page["memories"] for p in eng.get(m["id"], user_id=user).provenance}


def capture_conventions(
    eng: Any,
    prompts: list[str],
    user: str | None = None,
    session_id: str | None = None,
    project: str | None = None,
    answers: list[dict] | None = None,
) -> dict:
    """Store the conventions the user's prompts state as facts of `project`, each resolved
    against what is known: standing ones as conventions, the others as candidates (see the
    module's docstring); `answers` ([{prompt, offered}]) are prompts with the agent's message
    they answer, a pick among its options stored as the decision it makes. Returns {found,
    stored: [{memory_id, action, content, candidate}], already, reason}; outside a project
    nothing is stored (reason says so)."""
    said = statements_said(_check_prompts(prompts), _check_answers(answers))
    out: dict[str, Any] = {"found": len(said), "stored": [], "already": 0, "reason": ""}
    if not said:
        return out
    if project is None:
        out["reason"] = "no project: a captured convention belongs to the repository it was said in"
        return out
    known = _known_marks(eng, user, project)
    for s, standing in said.items():
        mark = _mark(session_id, s)
        if mark in known:
            out["already"] += 1
            continue
        tags = [CONVENTION_TAG] if standing else [CONVENTION_TAG, CANDIDATE_TAG]
        r = eng.store_memory(
            s,
            memory_type="fact",
            importance=CONVENTION_IMPORTANCE,
            tags=[*tags, AUTO_CAPTURE_TAG],
            metadata={"captured": "auto", "source": "user prompt", "session_id": session_id},
            provenance=[mark],
            user_id=user,
            session_id=session_id,
            project=project,
        )
        memory = r.memory
        # A candidate said again in another session, or restated as standing, is confirmed.
        if CANDIDATE_TAG in memory.tags and (standing or len(_sessions(memory.provenance)) >= 2):
            eng.confirm_convention(memory.id, user_id=user)
            memory = eng.get(memory.id, user_id=user)
        known.add(mark)
        out["stored"].append(
            {
                "memory_id": memory.id,
                "action": r.action,
                "content": memory.content,
                "candidate": CANDIDATE_TAG in memory.tags,
            }
        )
    return out


def project_conventions(eng: Any, user: str | None, project: str | None, limit: int) -> list[dict]:
    """The project's own active conventions, most used first (said or recalled most often, then
    the strongest): [{id, content, recall_count, strength}]. None outside a project."""
    if project is None or limit <= 0:
        return []
    page = eng.list_memories(tags=[CONVENTION_TAG], in_project=project, limit=KNOWN_SCANNED, user_id=user)
    confirmed = [m for m in page["memories"] if CANDIDATE_TAG not in m["tags"]]
    ranked = sorted(confirmed, key=lambda m: (-m["recall_count"], -m["strength"], m["created_at"]))
    return ranked[:limit]


def is_captured_convention(m: Memory) -> bool:
    """A convention or candidate capture stored and the user has not kept: it reaches a prompt
    only by conventions_for_prompt's rule (a candidate never)."""
    return CONVENTION_TAG in m.tags and (m.metadata or {}).get("captured") == "auto"


def conventions_for_prompt(eng: Any, user: str | None, prompt: str, project: str | None, limit: int) -> list[Memory]:
    """The project's conventions a prompt bears on, best first, at most `limit`: those recall
    finds strong and close in meaning (see CLOSE_CAL), then those that
    name a subject the prompt names (engram.text.convention_sentences.TOPICS: "how do I add a dependency?"
    and "we install packages with uv"), most used first. Nothing is reinforced."""
    query = prompt.strip()[:2000]
    if project is None or not query or limit <= 0:
        return []
    hits = eng.recall(
        query, limit=limit, tags=[CONVENTION_TAG], user_id=user, reinforce=False, scope=Scope.of(project), explain=True
    )
    subjects = topics_of(query)

    def close(h: Any) -> bool:
        cal = h.parts["cosine"] - h.parts["background"]
        return cal >= CLOSE_CAL or (cal >= STRONG_CAL and bool(topics_of(h.memory.content) & subjects))

    chosen = [
        h.memory
        for h in hits
        if h.memory.project == project and h.confidence == "strong" and CANDIDATE_TAG not in h.memory.tags and close(h)
    ]
    if subjects and len(chosen) < limit:
        have = {m.id for m in chosen}
        for c in project_conventions(eng, user, project, KNOWN_SCANNED):
            if c["id"] not in have and topics_of(c["content"]) & subjects:
                chosen.append(eng.get(c["id"], user_id=user))
                if len(chosen) >= limit:
                    break
    return chosen[:limit]


class Conventions:
    """The facade's part for conventions: the functions above over that Engram (its public
    methods only, so the write path and recall are the ones every caller gets)."""

    def __init__(self, eng: Any):
        self.eng = eng

    def capture_conventions(
        self,
        prompts: list[str],
        *,
        answers: list[dict] | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        project: str | None = None,
    ) -> dict:
        """Store the conventions the user stated in these prompts (and the decisions of the
        answers that pick an option the agent offered) as facts of `project` (capture_conventions)."""
        return capture_conventions(self.eng, prompts, user_id, session_id, project, answers)
