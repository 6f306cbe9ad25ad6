"""The MCP tools: one thin module per tool, each a ``ToolSpec`` over the domain ``Engine``.

``ALL_TOOLS`` is the set the server publishes, in the order clients list them. Nothing in this package imports
the MCP SDK; the server adapts specs to it.
"""

from typing import Any

from tools import (
    amend,
    conversation_write,
    create_scope,
    entities,
    erase,
    link_memory,
    list_scopes,
    memory_read,
    memory_write,
    move_scope,
    purge,
    recall,
    retire,
)
from tools._instructions import INSTRUCTIONS
from tools._spec import Caller, Hints, ToolSpec

ALL_TOOLS: tuple[ToolSpec[Any, Any], ...] = (
    memory_write.SPEC,
    conversation_write.SPEC,
    recall.SPEC,
    amend.SPEC,
    retire.SPEC,
    memory_read.SPEC,
    list_scopes.SPEC,
    create_scope.SPEC,
    move_scope.SPEC,
    link_memory.LINK,
    link_memory.UNLINK,
    entities.SPEC,
    purge.SPEC,
    erase.SPEC,
)

__all__ = ["ALL_TOOLS", "INSTRUCTIONS", "Caller", "Hints", "ToolSpec"]
