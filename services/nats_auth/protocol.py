"""The auth callout exchange with nats-server (2.10 and later), in server configuration mode.

For every client that is not one of the ``auth_users``, the server publishes on
``$SYS.REQ.USER.AUTH`` (in the ``auth_callout`` account) an *authorization request*: a NATS JWT
signed by the server's own nkey (``iss`` = the server's id), whose subject is the configured
issuer account and whose ``nats`` claim holds ``server_id``, ``user_nkey`` (a user key made for
this one connection), ``client_info`` and ``connect_opts`` (the client's CONNECT: ``auth_token``,
``user``, ``pass``, ...), with ``type: authorization_request``.

The reply is an *authorization response*, signed by the issuer account's nkey, with
``sub`` = ``user_nkey``, ``aud`` = the server's id and ``type: authorization_response``; its
``nats.jwt`` is a *user JWT* (also signed by the issuer, ``sub`` = ``user_nkey``, ``aud`` = the
account to place the user in, ``nats.pub``/``nats.sub`` the permissions, ``exp`` when the server
disconnects the user), or ``nats.error`` when the client is refused. Sources: ADR-26 (NATS
architecture and design) and nats-server's ``server/auth_callout.go``; requests encrypted
with an xkey are not supported (no ``xkey`` in the ``auth_callout`` block).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from services.nats_auth import nkeyjwt
from services.nats_auth.permissions import Permissions

REQUEST_TYPE = "authorization_request"
RESPONSE_TYPE = "authorization_response"
CALLOUT_SUBJECT = "$SYS.REQ.USER.AUTH"
CLAIMS_VERSION = 2
RESPONSE_TTL_S = 60
"""A response is good for a minute: the server checks it at once."""


class MalformedRequestError(Exception):
    """A message on the callout subject that is not a valid authorization request."""


class ServerId(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str = ""
    host: str = ""
    xkey: str = ""


class ConnectOptions(msgspec.Struct, frozen=True, kw_only=True):
    auth_token: str = ""
    user: str = ""
    name: str = ""


class ClientInfo(msgspec.Struct, frozen=True, kw_only=True):
    host: str = ""
    id: int = 0
    name: str = ""


class AuthorizationRequest(msgspec.Struct, frozen=True, kw_only=True):
    server_id: ServerId
    user_nkey: Annotated[str, Meta(min_length=1)]
    client_info: ClientInfo = ClientInfo()
    connect_opts: ConnectOptions = ConnectOptions()
    type: str = ""


class _RequestClaims(msgspec.Struct, frozen=True, kw_only=True):
    iss: str
    sub: str = ""
    exp: int = 0
    nats: AuthorizationRequest


def parse_request(data: bytes, *, issuer: str, now: float) -> AuthorizationRequest:
    """The request in ``data``, checked: signed by the server it names, meant for ``issuer``,
    not expired, with a user key; else MalformedRequestError saying why."""
    try:
        text = data.decode("ascii")
        raw = nkeyjwt.decode(text, roles=(nkeyjwt.SERVER,))
        claims = msgspec.convert(raw, _RequestClaims)
    except (UnicodeDecodeError, nkeyjwt.JwtError, msgspec.ValidationError) as exc:
        raise MalformedRequestError(str(exc)) from exc
    request = claims.nats
    if request.type != REQUEST_TYPE:
        raise MalformedRequestError(f"claim type {request.type!r}, not {REQUEST_TYPE!r}")
    if claims.iss != request.server_id.id:
        raise MalformedRequestError("signed by another server than the one it names")
    if claims.sub != issuer:
        raise MalformedRequestError("addressed to another issuer")
    if claims.exp and claims.exp < now:
        raise MalformedRequestError("expired")
    if request.server_id.xkey:
        raise MalformedRequestError("encrypted requests (xkey) are not supported")
    try:
        nkeyjwt.public_key_bytes(request.user_nkey, roles=(nkeyjwt.USER,))
    except nkeyjwt.JwtError as exc:
        raise MalformedRequestError(f"user_nkey: {exc}") from exc
    return request


def _permission(allow: tuple[str, ...], deny: tuple[str, ...] = ()) -> dict[str, list[str]]:
    out = {"allow": list(allow)}
    if deny:
        out["deny"] = list(deny)
    return out


def user_jwt(
    request: AuthorizationRequest,
    permissions: Permissions,
    *,
    signer: nkeyjwt.Signer,
    account: str,
    name: str,
    expires: int,
    now: float,
) -> str:
    """The user JWT that places the client in ``account`` with ``permissions`` until
    ``expires`` (seconds since the epoch), when the server disconnects it."""
    claims: dict[str, Any] = {
        "sub": request.user_nkey,
        "aud": account,
        "name": name,
        "exp": expires,
        "nats": {
            "pub": _permission(permissions.publish_allow, permissions.publish_deny),
            "sub": _permission(permissions.subscribe_allow),
            "subs": -1,
            "data": -1,
            "payload": -1,
            "type": "user",
            "version": CLAIMS_VERSION,
        },
    }
    return nkeyjwt.encode(claims, signer, now=now)


def response(
    request: AuthorizationRequest,
    *,
    signer: nkeyjwt.Signer,
    now: float,
    user: str = "",
    error: str = "",
) -> bytes:
    """The signed authorization response: the ``user`` JWT, or the ``error``."""
    body: dict[str, Any] = {"type": RESPONSE_TYPE, "version": CLAIMS_VERSION}
    if user:
        body["jwt"] = user
    else:
        body["error"] = error or "not authorized"
    claims = {
        "sub": request.user_nkey,
        "aud": request.server_id.id,
        "exp": int(now) + RESPONSE_TTL_S,
        "nats": body,
    }
    return nkeyjwt.encode(claims, signer, now=now).encode()
