"""Who a ServiceAccount token is, as the policy sees it: the Kubernetes TokenReview API's answer
(:mod:`shared.kube.reviews`) as an Identity.

What the API server answers is read here: ``system:serviceaccount:<namespace>:<name>``, and the
node from the user's extra ``authentication.kubernetes.io/node-name``. The token's own ``exp``
(read from its payload once the review accepted it) bounds how long the NATS user may live.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import msgspec

from services.nats_auth.permissions import Identity
from shared.kube.client import KubeClient
from shared.kube.reviews import (
    NotAuthenticatedError,
    ReviewedUser,
    ReviewFailedError,
    review_token,
)

__all__ = [
    "NotAuthenticatedError",
    "ReviewFailedError",
    "Reviewed",
    "identity_of",
    "review",
    "token_expiry",
]


class _Expiry(msgspec.Struct, frozen=True, kw_only=True):
    exp: int | float | None = None


@dataclass(frozen=True, slots=True)
class Reviewed:
    identity: Identity
    expires: int | None
    """The token's ``exp`` (seconds since the epoch), None when it has none."""


def identity_of(user: ReviewedUser) -> Identity:
    """The ServiceAccount ``user`` is, with its node; NotAuthenticatedError when the user is
    not a ServiceAccount."""
    account = user.service_account()
    if account is None:
        raise NotAuthenticatedError(f"user {user.username!r} is not a serviceaccount")
    namespace, name = account
    return Identity(namespace=namespace, service_account=name, node=user.node)


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
    user = await review_token(client, token, audiences=(audience,))
    return Reviewed(identity=identity_of(user), expires=token_expiry(token))
