"""Captured conventions at each prompt: given when a prompt needs one, kept out of unrelated ones.

    python -m benchmarks.conventions_noise

tests/data/convention_sessions.json: twenty sessions of ordinary work in one project, some with
a convention said in passing, are captured (engram.continuity.conventions, as the checkpoint does);
then each unrelated prompt and each prompt that needs a convention goes through the per-prompt
injection (engram.workflows.lifecycle.prompt_memories, what `engram hook UserPromptSubmit` calls). Prints
the share of unrelated prompts that got no captured convention, and the share of needing prompts
that got the one they need. The real embedding model, an in-memory store.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from engram import Engram
from engram.continuity.conventions import CONVENTION_TAG
from engram.core.settings import Settings
from engram.workflows.lifecycle import prompt_memories, session_start

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "convention_sessions.json"
PROJECT = "example.com/team/service"


def load_sessions(path: Path = SET) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def run(eng: Engram, data: dict, project: str = PROJECT) -> dict:
    """Capture the sessions, then inject for every prompt; the figures and what went wrong."""
    for i, prompts in enumerate(data["sessions"]):
        eng.capture_conventions(prompts, session_id=f"bench:{i}", project=project)
    captured = {
        m["id"]: m["content"]
        for m in eng.list_memories(tags=[CONVENTION_TAG], in_project=project, limit=500)["memories"]
    }

    def injected(prompt: str) -> list[str]:
        r = prompt_memories(eng, None, prompt, 300, 3, project)
        return [captured[i] for i in r["memory_ids"] if i in captured]

    def score(unrelated: list[str], needs: list[dict]) -> dict:
        noisy = [(p, got) for p in unrelated if (got := injected(p))]
        served = [(n, injected(n["prompt"])) for n in needs]
        missed = [(n["prompt"], got) for n, got in served if not any(n["convention"].lower() in g.lower() for g in got)]
        return {
            "unrelated": len(unrelated),
            "unrelated_clean_share": round(1 - len(noisy) / len(unrelated), 3),
            "needs": len(needs),
            "needs_served_share": round(1 - len(missed) / len(needs), 3),
            "noisy": noisy,
            "missed": missed,
        }

    out = {"captured": len(captured), **score(data["unrelated"], data["needs"])}
    if data.get("fresh_unrelated"):  # written after the rule was frozen: scored, never tuned on
        out["fresh"] = score(data["fresh_unrelated"], data["fresh_needs"])
    out["start_tokens"] = session_start(eng, None, None, 1500, project)["tokens"]
    return out


def main() -> None:
    from engram.models.embedding import load_embedder

    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"ENGRAM_HOME": home})
        embedder = load_embedder(settings.model, settings.model_cache)
        with Engram(":memory:", settings=settings, embedder=embedder) as eng:
            t = time.perf_counter()
            out = run(eng, load_sessions())
            out["seconds"] = round(time.perf_counter() - t, 1)
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
