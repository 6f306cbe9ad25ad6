"""Running one tool call, and the one place where failures become MCP results.

Two channels, as the MCP specification draws them:

- Failures the calling model should react to become a tool result with ``isError: true`` and a sentence that
  says what to do next: a domain error (``storage.domain.errors``: "no memory with id 3f2a…; call recall to find
  it"), arguments that do not match the tool's input schema (the field and what it accepts), the store not
  being open yet. The domain error's ``code`` is in the result's ``_meta`` for programs.
- Requests that cannot be a tool call at all become protocol errors (``MCPError``): an unknown tool name
  here; a malformed ``tools/call`` (no name, arguments not an object) is refused by the SDK before we run.

Crashes (any other exception) are logged with their traceback and reach the model as a generic error result,
without the exception's text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from storage.domain.errors import MnemographError
from tools import Caller, ToolSpec

if TYPE_CHECKING:
    from storage import Engine

log = logging.getLogger(__name__)

EngineSource = Callable[[], Awaitable["Engine"]]
"""Returns the open Engine, waiting while it opens; raises a MnemographError when it cannot be had."""

ERROR_META_KEY = "mnemograph/error"


async def invoke(
    spec: ToolSpec[Any, Any], arguments: dict[str, Any], engine: EngineSource, caller: Caller
) -> CallToolResult:
    """Validate ``arguments`` against the tool's input model, run it, and shape its output (or its failure)."""
    try:
        args = spec.input_model.model_validate(_unquote_json(spec.input_model, arguments))
    except ValidationError as exc:
        return invalid_arguments(spec.name, exc)
    try:
        out = await spec.run(await engine(), caller, args)
    except MnemographError as exc:
        return domain_error(spec.name, exc)
    except Exception:
        log.exception("tool %s crashed", spec.name)
        return _error_result(
            f"{spec.name} failed with an internal error (logged on the server). Retry once; if it fails again, "
            "tell the user Mnemograph needs attention.",
            code="internal",
        )
    return success(out)


def success(out: BaseModel) -> CallToolResult:
    """Structured content, plus the same JSON as text for clients that only show text to the model."""
    return CallToolResult(
        content=[TextContent(type="text", text=out.model_dump_json())],
        structured_content=out.model_dump(mode="json"),
    )


def domain_error(tool: str, exc: MnemographError) -> CallToolResult:
    """A domain error as the model reads it: the message, then what to do about it."""
    log.info("tool %s: %s: %s", tool, exc.code, exc.message)
    return _error_result(str(exc), code=exc.code)


def invalid_arguments(tool: str, exc: ValidationError) -> CallToolResult:
    """Which arguments are wrong and why, in one sentence the model can act on."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    log.info("tool %s: invalid arguments: %s", tool, [p.split(":")[0] for p in problems])
    return _error_result(
        f"invalid arguments for {tool}: " + "; ".join(problems) + ". Fix them and call again.",
        code="invalid_arguments",
    )


def unknown_tool(name: str) -> MCPError:
    return MCPError(
        INVALID_PARAMS, f"unknown tool {name[:80]!r}; call tools/list for the tools Mnemograph has"
    )


def _error_result(text: str, *, code: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], is_error=True, _meta={ERROR_META_KEY: {"code": code}}
    )


def _unquote_json(model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    # Some clients (Claude Desktop among them) send list and object arguments as JSON text. Decode those for
    # fields that are not strings, as the SDK's own tool path does, so such calls still validate.
    out = dict(arguments)
    for name, field in model.model_fields.items():
        value = out.get(name)
        if isinstance(value, str) and field.annotation is not str and value.lstrip()[:1] in ("[", "{"):
            try:
                decoded = json.loads(value)
            except ValueError:
                continue
            if isinstance(decoded, list | dict):
                out[name] = decoded
    return out
