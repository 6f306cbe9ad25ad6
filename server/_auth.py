"""Who is calling over HTTP: bearer tokens checked with the SDK's token-verifier hook.

- ``FileTokenVerifier`` is the SDK's ``TokenVerifier`` over ``DATA/tokens.json`` (``server._tokens``). It
  hands back an ``AccessToken`` whose ``client_id`` is the token's name and whose ``scopes`` are its grants
  (``team:t=w``). ``principal_of`` turns any such ``AccessToken`` into a domain ``Principal``.
- **Seam for an external OAuth issuer**: a JWT verifier (signature checked against the issuer's JWKS,
  ``aud`` = this server's resource URL, ``exp`` checked) implements the same ``verify_token`` and returns an
  ``AccessToken`` with ``client_id`` = the subject and ``scopes`` = grant strings taken from a claim. Pass it
  to ``owner_app`` (or to ``build_server(token_verifier=..., auth=AuthSettings(issuer_url=...))`` for a
  single-front deployment); nothing else changes, because the Engine only ever sees a ``Principal``.
- ``BearerGate`` guards the owner's ``/mcp`` for requests a front relays with auth required: the SDK's
  ``BearerAuthBackend`` authenticates and a missing or bad token gets 401 ``WWW-Authenticate: Bearer
  error="invalid_token"`` with a description saying how to get a token. Tokens are issued out of band
  (``mnemograph token create``), so there is no authorization server to name: the protected-resource metadata
  (RFC 9728) is served, and advertised in the 401, only when an external ``issuer`` is configured; naming one
  that does not exist sends OAuth-capable clients (Claude Code) into a sign-in that cannot succeed. The gate is per request rather than built into
  the SDK app because one owner serves several fronts, each with its own address and its own auth policy
  (``--no-auth`` on loopback).
"""

from __future__ import annotations

import logging
from functools import lru_cache

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from scopes import Grant, InvalidGrant, Principal
from server._tokens import TokenError, TokenStore

log = logging.getLogger(__name__)

METADATA_PATH = "/.well-known/oauth-protected-resource"


class FileTokenVerifier:
    """The SDK's ``TokenVerifier`` over the data directory's token file; a revoke is seen on the next call."""

    def __init__(self, store: TokenStore) -> None:
        self._store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            info = self._store.verify(token)
        except TokenError as exc:
            log.error("refusing every token: %s", exc)
            return None
        if info is None:
            return None
        return AccessToken(token=token, client_id=info.name, scopes=[str(g) for g in info.grants])


def principal_of(token: AccessToken, client: str = "") -> Principal:
    """The principal a verified token stands for: its name, and its grants (scopes that are not grant strings,
    as an external issuer may add, are ignored; a token with no grant can do nothing)."""
    grants: list[Grant] = []
    for raw in token.scopes:
        try:
            grants.append(Grant.parse(raw))
        except InvalidGrant:
            continue
    return Principal(name=token.client_id, client=client, grants=tuple(grants))


class BearerGate:
    """Authenticate one request; on success call ``app`` with the token's principal, else answer 401."""

    def __init__(self, verifier: TokenVerifier, issuer: str | None = None) -> None:
        self._backend = BearerAuthBackend(verifier)
        self._issuer = issuer

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, resource: str, app: ASGIApp
    ) -> None:
        if scope["path"].startswith(METADATA_PATH):
            if self._issuer is None:
                await _NO_METADATA(scope, receive, send)
                return
            response = await _metadata(resource, self._issuer).handle(Request(scope, receive))
            await response(scope, receive, send)
            return
        result = await self._backend.authenticate(HTTPConnection(scope))
        if result is not None:
            scope["auth"], scope["user"] = result
        else:
            scope.pop("user", None)
            if self._issuer is None:
                sent = any(k.lower() == b"authorization" for k, _ in scope.get("headers", ()))
                await (_REJECTED if sent else _UNAUTHORIZED)(scope, receive, send)
                return
        await _require(resource, app)(scope, receive, send)


def authenticated_principal(scope: Scope) -> Principal | None:
    """The principal ``BearerGate`` authenticated for this request, if any."""
    user = scope.get("user")
    return principal_of(user.access_token) if isinstance(user, AuthenticatedUser) else None


_HOW = (
    "send Authorization: Bearer <token>; create a token with `mnemograph setup http` or `mnemograph token "
    "create` on the server's machine"
)
_UNAUTHORIZED = JSONResponse(
    {"error": "invalid_token", "error_description": f"Authentication required: {_HOW}"},
    status_code=401,
    headers={
        "WWW-Authenticate": f'Bearer error="invalid_token", error_description="Authentication required: {_HOW}"'
    },
)
_NOT_VALID = (
    "the bearer token sent is not valid here (unknown, revoked or mistyped); check the Authorization header "
    "(Bearer <token>) or ask for a new token (`mnemograph token create` on the server's machine)"
)
# A token was sent and is not valid: said apart from a missing one, so the person fixes the right thing.
_REJECTED = JSONResponse(
    {"error": "invalid_token", "error_description": _NOT_VALID},
    status_code=401,
    headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{_NOT_VALID}"'},
)
_NO_METADATA = JSONResponse(
    {
        "error": "not_found",
        "error_description": f"no OAuth authorization server: tokens are issued locally; {_HOW}",
    },
    status_code=404,
)


@lru_cache(maxsize=16)
def _metadata(resource: str, issuer: str) -> ProtectedResourceMetadataHandler:
    return ProtectedResourceMetadataHandler(
        ProtectedResourceMetadata(
            resource=AnyHttpUrl(resource),
            authorization_servers=[AnyHttpUrl(issuer)],
            resource_name="Mnemograph",
        )
    )


def _require(resource: str, app: ASGIApp) -> RequireAuthMiddleware:
    return RequireAuthMiddleware(app, [], build_resource_metadata_url(AnyHttpUrl(resource)))
