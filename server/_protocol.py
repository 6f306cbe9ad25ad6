"""What front-ends and the owner agree on: the hello line, the headers a front adds, the owner's HTTP paths.

Standard library only: both front-ends import this on their fast paths.
"""

from __future__ import annotations

HELLO_KEY = "mnemograph-hello"
"""The key of the one JSON line a stdio front-end sends before any MCP traffic on an owner connection."""

HEADER_PREFIX = "mnemograph-"
"""Headers a front adds for the owner. A front drops any the client sent: the owner trusts these."""
DEFAULT_SCOPES_HEADER = HEADER_PREFIX + "default-scopes"  # comma-separated scope ids
ALLOWED_HOSTS_HEADER = HEADER_PREFIX + "allowed-hosts"  # the front's DNS-rebinding policy, comma-separated
ALLOWED_ORIGINS_HEADER = HEADER_PREFIX + "allowed-origins"
AUTH_HEADER = (
    HEADER_PREFIX + "auth"
)  # "bearer" (the default, also when absent) or "none" (--no-auth, loopback)
PRINCIPAL_HEADER = HEADER_PREFIX + "principal"  # the local principal's name, used only with auth "none"
FRONT_HEADER = HEADER_PREFIX + "front"  # on a lease: JSON {"pid", "url", "command"} of the front holding it

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
LEASE_PATH = "/-/lease"
UI_PATH = "/ui"  # the web UI (server.ui), mounted by the owner
UI_RELAYED_KEY = (
    "mnemograph.relayed"  # set in the ASGI scope by the owner: True when an HTTP front relayed it
)

# One MCP message over any transport (a stdio line, an HTTP request body); docs/limits.md. The SDK's streamable
# HTTP transport refuses larger bodies itself, and a valid request is far smaller (content is capped at 32k
# characters), so a larger one is refused before it is read whole.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

# Seconds the owner's HTTP socket keeps an idle connection open; a front's pool drops its idle ones sooner.
OWNER_KEEP_ALIVE = 30.0
