"""The declaration types of an operation (`Op`, `Param`, `Http`, `Cli`) and the parameters several share.

Plain frozen dataclasses, no pydantic at import: the CLI builds its parser from the declarations
and should not pay for pydantic; the pydantic annotation is built on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engram.core.bounds import Bound
from engram.core.types import MEMORY_TIERS, MEMORY_TYPES, SEARCH_MODES, TASK_STATUSES

__all__ = [
    "ALL_PROJECTS",
    "METADATA",
    "REQUIRED",
    "SCOPE",
    "TAGS",
    "TAKE_OVER",
    "TASK_ID",
    "Cli",
    "Http",
    "Items",
    "MemoryTypeT",
    "Op",
    "Param",
    "SearchModeT",
    "TaskStatusT",
    "TierT",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # the default of a parameter the caller must give


@dataclass(frozen=True)
class Param:
    """One argument of an operation. `type` is a typing expression pydantic understands."""

    name: str
    type: Any
    description: str
    default: Any = REQUIRED
    ge: float | None = None  # inclusive bounds of a number
    le: float | None = None
    flag: str | None = None  # the CLI option; default --<name with dashes>
    # The bounds from engram.core.bounds' table, which the engine checks too: they set ge and le.
    bound: Bound | None = None

    def __post_init__(self) -> None:
        if self.bound is not None:
            object.__setattr__(self, "ge", self.bound.low)
            object.__setattr__(self, "le", self.bound.high)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def bounds_text(self) -> str:
        """How a refusal words the bounds, e.g. 'must be a whole number from 1 to 1000'."""
        if self.ge is not None and self.le is not None:
            if self.type is int:
                return f"must be a whole number from {self.ge:g} to {self.le:g}"
            return f"must be a number between {self.ge:g} and {self.le:g}"
        if self.ge is not None:
            return f"must be at least {self.ge:g}"
        return f"must be at most {self.le:g}"

    def annotated(self) -> Any:
        """The pydantic annotation: the type with its bounds and description."""
        from typing import Annotated

        from pydantic import Field

        return Annotated[self.type, Field(description=self.description, ge=self.ge, le=self.le)]


@dataclass(frozen=True)
class Http:
    """The operation as a JSON route. Path parameters come from the path, `query` ones from the
    query string, the rest from the JSON body (POST and PATCH)."""

    method: str
    path: str
    summary: str
    status: int = 200
    query: tuple[str, ...] = ()
    empty_body_ok: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()  # this route's own defaults, e.g. POST /maintenance applies


@dataclass(frozen=True)
class Cli:
    """The operation as a CLI command. `params` None: every parameter; `positional` ones are arguments."""

    command: tuple[str, ...]
    help: str
    positional: tuple[str, ...] = ()
    params: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Op:
    name: str
    params: tuple[Param, ...] = ()
    mcp: Literal["read", "write", "write_idempotent", "destructive"] | None = None  # None: not a tool
    title: str = ""  # the MCP tool's title
    description: str = ""  # the MCP tool's description, written for the model that calls it
    http: Http | None = None
    cli: tuple[Cli, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def model_name(self) -> str:
        """store_memory -> StoreMemory: the body model's name in the OpenAPI document."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# ---------------------------------------------------------------- shared parameters


MemoryTypeT = Literal[MEMORY_TYPES]  # type: ignore[valid-type]
SearchModeT = Literal[SEARCH_MODES]  # type: ignore[valid-type]
TaskStatusT = Literal[TASK_STATUSES]  # type: ignore[valid-type]
TierT = Literal[MEMORY_TIERS]  # type: ignore[valid-type]
# A lone string where a list is expected is taken as a one-item list, as models often send one.
Items = list[str] | str | None
TAGS = Param("tags", Items, "Short labels to filter by later, e.g. ['auth', 'db'].", None, flag="--tag")
METADATA = Param("metadata", dict[str, Any] | None, "Extra JSON kept with the memory.", None)
TASK_ID = Param("task_id", str | None, "Id from create_task (t-...); links this to that task.", None, flag="--task")
# Projects (docs/projects.md): a read sees the caller's project plus what belongs to no project;
# all_projects widens it. A write belongs to the caller's project unless scope is "global".
ALL_PROJECTS = Param(
    "all_projects",
    bool,
    ("Search every project's memories and tasks, not only this project's and the global ones."),
    False,
)
SCOPE = Param(
    "scope",
    Literal["project", "global"],
    (
        "project (default): belongs to the project you work in; global: seen from every project "
        "(e.g. a preference of the user's)."
    ),
    "project",
)
TAKE_OVER = Param(
    "take_over",
    bool,
    (
        "Take the task from the session holding it (it is told on its next call). Only when the "
        "user asked you to, or that session is stuck."
    ),
    False,
)
