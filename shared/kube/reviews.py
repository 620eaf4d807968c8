"""Asking the API server who a bearer token is and what that user may do: the TokenReview and
SubjectAccessReview APIs, as every component that takes Kubernetes tokens from its callers
uses them (the NATS authenticator, the metrics endpoints, the IMEX certificate issuer).

    user = await review_token(client, token, audiences=("nats",))   # or () for the API's own
    decision = await access_review(client, user, path="/metrics", verb="get")

The API server checks the token's signature, audience and expiry and that the objects it is
bound to still exist; it answers the user's name, uid, groups and extra (a node-bound token
names its node in ``authentication.kubernetes.io/node-name``). :class:`NotAuthenticatedError`
means the token stands for nobody here; :class:`ReviewFailedError` means nothing is known (the
API cannot be reached, or refuses the reviewer itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

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
SUBJECT_ACCESS_REVIEWS = Resource(
    group="authorization.k8s.io",
    version="v1",
    plural="subjectaccessreviews",
    kind="SubjectAccessReview",
    namespaced=False,
)
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
NODE_NAME = "authentication.kubernetes.io/node-name"
"""The extra key of a node-bound token's user: the node its pod runs on (or the Node itself)."""


class NotAuthenticatedError(Exception):
    """The token does not stand for a user (of this audience); the message says why."""


class ReviewFailedError(Exception):
    """The review itself failed (API unreachable, the reviewer refused): nothing is known."""


class ReviewedUser(msgspec.Struct, frozen=True, kw_only=True):
    """The user a TokenReview answered."""

    username: str = ""
    uid: str = ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}

    @property
    def node(self) -> str:
        """The node a node-bound token names; "" when it is not bound to one."""
        nodes = self.extra.get(NODE_NAME) or []
        return nodes[0] if nodes else ""

    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) of a ServiceAccount's user; None for any other user."""
        if not self.username.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        namespace, _, name = self.username.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        return (namespace, name) if namespace and name else None


class _TokenStatus(msgspec.Struct, frozen=True, kw_only=True):
    authenticated: bool = False
    user: ReviewedUser = ReviewedUser()
    audiences: list[str] = []
    error: str = ""


class _TokenReview(msgspec.Struct, frozen=True, kw_only=True):
    status: _TokenStatus = _TokenStatus()


class _AccessStatus(msgspec.Struct, frozen=True, kw_only=True):
    allowed: bool = False
    denied: bool = False
    reason: str = ""
    evaluationError: str = ""  # noqa: N815 (the API's field name)


class _AccessReview(msgspec.Struct, frozen=True, kw_only=True):
    status: _AccessStatus = _AccessStatus()


@dataclass(frozen=True, slots=True)
class AccessDecision:
    allowed: bool
    reason: str
    """The authorizer's reason (RBAC names the binding that allowed), often "" on a denial."""


async def review_token(
    client: KubeClient, token: str, *, audiences: Sequence[str] = ()
) -> ReviewedUser:
    """The user ``token`` stands for, if it is valid for one of ``audiences`` (empty: the API
    server's own audiences)."""
    spec: dict[str, object] = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    try:
        raw = await client.create(TOKEN_REVIEWS, body)
    except KubeApiError as exc:
        raise ReviewFailedError(f"TokenReview failed: {exc}") from exc
    try:
        status = msgspec.json.decode(raw, type=_TokenReview).status
    except msgspec.DecodeError as exc:
        raise ReviewFailedError(f"TokenReview answer does not decode: {exc}") from exc
    if not status.authenticated:
        raise NotAuthenticatedError(status.error or "token not authenticated")
    if audiences and not set(audiences) & set(status.audiences):
        raise NotAuthenticatedError(f"token is not for audience {' or '.join(audiences)!r}")
    return status.user


async def access_review(
    client: KubeClient, user: ReviewedUser, *, path: str, verb: str
) -> AccessDecision:
    """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user.username,
            "uid": user.uid,
            "groups": user.groups,
            "extra": user.extra,
            "nonResourceAttributes": {"path": path, "verb": verb},
        },
    }
    try:
        raw = await client.create(SUBJECT_ACCESS_REVIEWS, body)
    except KubeApiError as exc:
        raise ReviewFailedError(f"SubjectAccessReview failed: {exc}") from exc
    try:
        status = msgspec.json.decode(raw, type=_AccessReview).status
    except msgspec.DecodeError as exc:
        raise ReviewFailedError(f"SubjectAccessReview answer does not decode: {exc}") from exc
    return AccessDecision(
        allowed=status.allowed and not status.denied,
        reason=status.reason or status.evaluationError,
    )
