"""Who a ServiceAccount token is: the Kubernetes TokenReview API's answer, as an Identity.

The API server checks the signature, the audience, the expiry and that the ServiceAccount
and the object the token is bound to (pod, node) still exist. What it answers is read here:
``system:serviceaccount:<namespace>:<name>``, and the node from the user's extra
``authentication.kubernetes.io/node-name``. The token's own ``exp`` (read from its payload once
the review accepted it) bounds how long the NATS user may live.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import msgspec

from services.nats_auth.permissions import Identity
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import Resource

TOKEN_REVIEWS = Resource(
    group="authentication.k8s.io",
    version="v1",
    plural="tokenreviews",
    kind="TokenReview",
    namespaced=False,
)
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
NODE_NAME = "authentication.kubernetes.io/node-name"


class NotAuthenticatedError(Exception):
    """The token does not stand for a ServiceAccount of this audience; the message says why."""


class ReviewFailedError(Exception):
    """The TokenReview itself failed (API unreachable, forbidden): nothing is known."""


class _User(msgspec.Struct, frozen=True, kw_only=True):
    username: str = ""
    extra: dict[str, list[str]] = {}


class _Status(msgspec.Struct, frozen=True, kw_only=True):
    authenticated: bool = False
    user: _User = _User()
    audiences: list[str] = []
    error: str = ""


class _Review(msgspec.Struct, frozen=True, kw_only=True):
    status: _Status = _Status()


class _Expiry(msgspec.Struct, frozen=True, kw_only=True):
    exp: int | float | None = None


@dataclass(frozen=True, slots=True)
class Reviewed:
    identity: Identity
    expires: int | None
    """The token's ``exp`` (seconds since the epoch), None when it has none."""


def identity_of(username: str, extra: dict[str, list[str]]) -> Identity:
    """The ServiceAccount ``username`` names, with its node; NotAuthenticatedError when the
    user is not a ServiceAccount."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        raise NotAuthenticatedError(f"user {username!r} is not a serviceaccount")
    namespace, _, name = username.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
    if not namespace or not name:
        raise NotAuthenticatedError(f"malformed serviceaccount user {username!r}")
    nodes = extra.get(NODE_NAME) or []
    return Identity(namespace=namespace, service_account=name, node=nodes[0] if nodes else "")


def token_expiry(token: str) -> int | None:
    """The ``exp`` claim of a (reviewed) JWT; None when there is none or it does not decode."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = msgspec.json.decode(payload, type=_Expiry).exp
    except (binascii.Error, ValueError, msgspec.DecodeError):
        return None
    return int(exp) if exp is not None else None


async def review(client: KubeClient, token: str, *, audience: str) -> Reviewed:
    """TokenReview ``token`` for ``audience``."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": [audience]},
    }
    try:
        raw = await client.create(TOKEN_REVIEWS, body)
    except KubeApiError as exc:
        raise ReviewFailedError(f"TokenReview failed: {exc}") from exc
    try:
        status = msgspec.json.decode(raw, type=_Review).status
    except msgspec.DecodeError as exc:
        raise ReviewFailedError(f"TokenReview answer does not decode: {exc}") from exc
    if not status.authenticated:
        raise NotAuthenticatedError(status.error or "token not authenticated")
    if audience not in status.audiences:
        raise NotAuthenticatedError(f"token is not for audience {audience!r}")
    identity = identity_of(status.user.username, status.user.extra)
    return Reviewed(identity=identity, expires=token_expiry(token))
