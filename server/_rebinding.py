"""DNS-rebinding protection for the requests an HTTP front relays: their Host and Origin against its policy.

The same rules as the SDK's ``TransportSecurityMiddleware`` (an exact value, or ``name:*`` for any port), but the
refusals say which name was refused and how to allow it, since the person who meets a 421 is usually the one who
runs the server and reached it by a name it was not told about.
"""

from __future__ import annotations

from functools import lru_cache

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

VARIABLE_HINT = (
    "to allow it, add it to MNEMOGRAPH_ALLOWED_HOSTS (comma-separated host names or IP addresses, optionally "
    "with :PORT) in the environment of `mnemograph serve --transport http` and restart it; see docs/mcp.md"
)


@lru_cache(maxsize=16)
def _patterns(values: str) -> tuple[frozenset[str], tuple[str, ...]]:
    items = [v.strip().lower() for v in values.split(",") if v.strip()]
    return frozenset(items), tuple(v[:-1] for v in items if v.endswith(":*"))


def matches(value: str, policy: str) -> bool:
    """Whether a Host (or Origin) value is allowed by a comma-separated policy of exact values and ``x:*``."""
    exact, prefixes = _patterns(policy)
    value = value.strip().lower()
    if value in exact:
        return True
    return any(value.startswith(p) and value[len(p) :].isdigit() for p in prefixes)


def refusal(headers: Headers, hosts: str, origins: str, *, is_post: bool) -> Response | None:
    """The response refusing a relayed request, or None when its Host, Origin and Content-Type pass."""
    if is_post and not headers.get("content-type", "").lower().startswith("application/json"):
        return _error(400, "invalid_content_type", "a POST to /mcp must have Content-Type: application/json")
    host = headers.get("host", "")
    if not host or not matches(host, hosts):
        shown = repr(host) if host else "(none)"
        return _error(
            421,
            "host_not_allowed",
            f"this Mnemograph server does not answer to the host name {shown} (the request's Host header), "
            f"which protects it against DNS rebinding; {VARIABLE_HINT}",
        )
    origin = headers.get("origin")
    if origin and not matches(origin, origins):
        return _error(
            403,
            "origin_not_allowed",
            f"this Mnemograph server does not accept requests from web pages of {origin!r} (the Origin header); "
            "to allow it, add that origin to MNEMOGRAPH_ALLOWED_ORIGINS (or its host to MNEMOGRAPH_ALLOWED_HOSTS) "
            "where `mnemograph serve --transport http` runs and restart it",
        )
    return None


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": code, "message": message}, status_code=status)
