"""The table of operations: every declaration, in the order the calling model sees the MCP tools."""

from __future__ import annotations

from engram.ops.admin_ops import ADMINISTRATION, STORE_WIDE
from engram.ops.declarations import Op
from engram.ops.hook_ops import HOOK_OPS
from engram.ops.memory_ops import CURATION, MEMORY_TOOLS, MORE_MEMORY_TOOLS
from engram.ops.share_ops import SHARE_OPS
from engram.ops.task_ops import TASK_TOOLS

# MCP tools are listed to the calling model in this order, and the CLI's commands too: the blocks
# keep the order the operations were always declared in.
OPS_LIST: tuple[Op, ...] = (
    *MEMORY_TOOLS,
    *TASK_TOOLS,
    *MORE_MEMORY_TOOLS,
    *STORE_WIDE,
    *CURATION,
    *HOOK_OPS,
    *ADMINISTRATION,
    *SHARE_OPS,
)
OPS: dict[str, Op] = {op.name: op for op in OPS_LIST}
TOOLS: tuple[str, ...] = tuple(op.name for op in OPS_LIST if op.mcp is not None)
