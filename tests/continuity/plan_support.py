"""A task whose first handoff plans three steps: the set-up the plan, resume and prompt tests share."""

from __future__ import annotations


def three_step_task(eng, clock):
    t = eng.create_task("CSV export", "Export memories as CSV")
    eng.touch_session("A")
    eng.handoff(
        "Writer works",
        next_steps=["add csv flag to export command", "write csv exporter tests", "support tsv output"],
        task_id=t.id,
        session_id="A",
    )
    eng.end_session("A", clean=True)
    clock.advance(minutes=10)
    return t
