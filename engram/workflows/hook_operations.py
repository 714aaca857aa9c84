"""The operations the agents' lifecycle hooks call (engram.hooks, through the daemon), transport-free:
the block a session starts with, a prompt's memories, per-turn capture and the checkpoint.

`engram.api.Api` serves them (declared in engram.ops.hook_ops, their arguments checked by
Api.call); each takes the arguments complete plus the caller's context and calls the workflow that
does it (lifecycle.py, capture.py) over the facade.
"""

from __future__ import annotations

from engram.core.types import Ctx
from engram.engram import Engram
from engram.workflows import capture, lifecycle


class HookOperations:
    """The hooks' operations of one Api, over its facade."""

    def __init__(self, engram: Engram):
        self.eng = engram
        self.injections = lifecycle.SessionInjections()

    def session_start(self, ctx: Ctx, max_tokens: int) -> dict:
        self.injections.forget(ctx.session_id)  # a new context: nothing injected into it yet
        return lifecycle.session_start(self.eng, ctx.user_id, ctx.session_id, max_tokens, ctx.project)

    def prompt_memories(self, ctx: Ctx, prompt: str, max_tokens: int, limit: int) -> dict:
        r = lifecycle.prompt_memories(
            self.eng,
            ctx.user_id,
            prompt,
            max_tokens,
            limit,
            ctx.project,
            shown_before=self.injections.shown(ctx.session_id),
        )
        self.injections.add(ctx.session_id, r["memory_ids"])
        return r

    def session_capture(
        self, ctx: Ctx, fixes: list[dict] | None, episodes: list[dict] | None, task_id: str | None, client: str
    ) -> dict:
        return capture.session_capture(
            self.eng,
            user=ctx.user_id,
            session_id=ctx.session_id,
            client=client or ctx.client,
            fixes=fixes or [],
            episodes=episodes or [],
            task_id=task_id,
            project=ctx.project,
        )

    def session_checkpoint(
        self,
        ctx: Ctx,
        summary: str,
        completed: list[str] | str | None,
        in_progress: list[str] | str | None,
        blocked: list[str] | str | None,
        next_steps: list[str] | str | None,
        step_statuses: list[str] | None,
        failures: list[dict] | None,
        task_id: str | None,
        checkpoint: dict,
        interrupted: bool,
    ) -> dict:
        def items(v: list[str] | str | None) -> list[str]:
            return [v] if isinstance(v, str) else list(v or [])

        if interrupted:  # a compaction: what was injected into the context is summarised away
            self.injections.forget(ctx.session_id)
        return lifecycle.session_checkpoint(
            self.eng,
            user=ctx.user_id,
            session_id=ctx.session_id,
            summary=summary,
            completed=items(completed),
            in_progress=items(in_progress),
            blocked=items(blocked),
            next_steps=items(next_steps),
            step_statuses=list(step_statuses or []),
            failures=list(failures or []),
            task_id=task_id,
            checkpoint=checkpoint,
            interrupted=bool(interrupted),
            project=ctx.project,
        )
