"""One name per operation: the op table (engram.ops) names it, `Api` has the method of that name, and
that method calls the facade method (or the function above the facade) of the same name, which is a
delegation to a part's method of the same name again. A newcomer who reads `get_task` in a tool
finds `Engram.get_task` and `Tasks.get_task`, not `task_view` beside an unrelated `list_tasks`."""

from __future__ import annotations

import ast
import inspect
import textwrap

from engram import ops
from engram.api import Api
from engram.engram import Engram

# Operations whose Api method puts together several calls, none of which is the operation itself.
COMPOSITE = {
    "health": "the status of the model, the index and the store, read from three facade attributes",
    "reindex": "rebuild_indexes, or reembed_all with reembed: two facade methods chosen by an argument",
}
# The facade's names of the previous release, each the same method as its new name, kept for one
# release (CHANGELOG.md, Unreleased) and then removed.
RENAMED = {
    "store": "store_memory",
    "update": "update_memory",
    "forget": "forget_memory",
    "set_pinned": "pin_memory",
    "context": "get_context",
    "recall_context": "recall_memory",
    "memory_view": "get_memory",
    "strength_curve": "memory_strength",
    "versions": "memory_versions",
    "projects": "list_projects",
    "handoff": "session_handoff",
    "task_overview": "list_tasks",
    "task_view": "get_task",
    "prompt_block": "memory_prompt",
    "keep": "keep_memory",
}


def callees(source: str) -> set[str]:
    """The last name of everything the function in `source` calls: self.eng.get_task(...) ->
    get_task, keys.create_key(...) -> create_key, self.x(...) -> self.x."""
    fn = ast.parse(textwrap.dedent(source)).body[0]
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                own = isinstance(f.value, ast.Name) and f.value.id == "self"
                out.add(f"self.{f.attr}" if own else f.attr)
    return out


def misnamed(sources: dict[str, str]) -> list[str]:
    """Operations (name -> the source of the method that serves it) whose method calls nothing of
    the operation's name (another operation, self.<op>, counts: run_maintenance is
    consolidate_memory applied)."""
    bad = []
    for name, source in sources.items():
        called = callees(source)
        if name in COMPOSITE or name in called or any(f"self.{o}" in called for o in sources if o != name):
            continue
        bad.append(f"{name} calls {', '.join(sorted(c for c in called if not c.startswith('self.'))) or 'nothing'}")
    return bad


def served_by(name: str) -> str:
    """The source of the method that serves operation `name`: Api's own, or the one an Api
    attribute is served by (Api.health -> StoreOperations.health)."""
    method = vars(Api)[name]
    return inspect.getsource(getattr(method, "__wrapped__", method))


def delegated_name(attr: object) -> str | None:
    """The part's method a facade delegation calls (Engram.get_task -> Tasks.get_task), else None."""
    wrapped = getattr(attr, "__wrapped__", None)
    return None if wrapped is None else wrapped.__name__


def test_each_operation_calls_what_has_its_name():
    bad = misnamed({name: served_by(name) for name in ops.OPS})
    assert not bad, "name the method that does an operation after it (keep the old name an alias):\n" + "\n".join(bad)


def test_the_facade_method_of_an_operation_delegates_to_the_part_method_of_that_name():
    facade = {n for n in ops.OPS if n in vars(Engram)}
    assert {"recall_memory", "get_task", "list_tasks", "pin_memory", "store_memory"} <= facade  # the scan sees them
    bad = [
        f"Engram.{n} calls {delegated_name(vars(Engram)[n])}"
        for n in sorted(facade)
        if delegated_name(vars(Engram)[n]) != n
    ]
    assert not bad, "\n".join(bad)


def test_the_old_names_are_the_same_methods_for_one_release():
    for old, new in RENAMED.items():
        assert vars(Engram)[old] is vars(Engram)[new], old
    # an old name that is not in RENAMED is not an alias of an operation's method
    ops_methods = {id(vars(Engram)[n]) for n in ops.OPS if n in vars(Engram)}
    aliases = {n for n, v in vars(Engram).items() if id(v) in ops_methods and n not in ops.OPS}
    assert aliases == set(RENAMED)


def test_the_check_flags_an_operation_called_by_another_name():
    # A check that cannot fail guards nothing: the names the issue found, planted again.
    planted = {
        "get_task": "def get_task(self, ctx, task_id):\n    return self.eng.task_view(task_id)",
        "list_tasks": "def list_tasks(self, ctx):\n    return {'tasks': self.eng.task_overview(limit=5)}",
        "pin_memory": "def pin_memory(self, ctx, memory_id):\n    return self.eng.pin_memory(memory_id)",
        "run_maintenance": "def run_maintenance(self, ctx):\n    return self.pin_memory(ctx, 'm')",
    }
    assert misnamed(planted) == [
        "get_task calls task_view",
        "list_tasks calls task_overview",
    ]
