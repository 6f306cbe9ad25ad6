"""What every tool module provides, and what the server hands a tool when it runs it.

A tool is a ``ToolSpec``: its MCP name, the text the calling model reads, one pydantic model for its input and
one for its output, truthful behaviour hints, and a short ``async`` function over the domain ``Engine``. The
server (``server/``) publishes specs through the MCP SDK; nothing here imports the SDK.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, ParamSpec, TypeVar

import anyio.to_thread
from pydantic import BaseModel

from scopes import Principal

if TYPE_CHECKING:
    # Only for annotations: importing the engine pulls in the store libraries (~1 s), which must stay off the
    # MCP handshake path. The server hands tools an already-open Engine.
    from storage import Engine
    from storage.enrich.llm import Extractor

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Hints:
    """Behaviour hints published as MCP tool annotations. Keep them true: clients decide on confirmations
    (and some on auto-approval) from them."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False  # every tool works on the local store only


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling, and the defaults of their session. Built by the server for every call."""

    principal: Principal
    default_scopes: tuple[str, ...]
    # The calling client's own model (MCP sampling, when on): the pass after the commit of what this call
    # writes asks it. None: the configured LLM, if any.
    extractor: Extractor | None = None

    def scopes_or_default(self, scopes: list[str] | None) -> list[str]:
        """The scopes a call names, or the session's default scopes when it names none."""
        return list(scopes) if scopes else list(self.default_scopes)

    def read_scopes(self, scopes: list[str] | None) -> list[str] | None:
        """The scopes a read names; when it names none, the session's defaults for the local principal, and
        None (every scope it may read) for a principal with grants, whose session defaults are not its own."""
        if scopes:
            return list(scopes)
        return list(self.default_scopes) if self.principal.unrestricted else None


@dataclass(frozen=True, slots=True)
class ToolSpec(Generic[In, Out]):
    """One MCP tool. ``run`` validates nothing itself: the server validates ``input_model`` first."""

    name: str
    title: str
    description: str
    input_model: type[In]
    output_model: type[Out]
    hints: Hints
    run: Callable[[Engine, Caller, In], Awaitable[Out]]


async def blocking(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run one synchronous Engine call in a worker thread, so the event loop keeps serving other sessions.

    The Engine is thread-safe: reads run in the calling thread, writes queue for its single writer.
    """
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
