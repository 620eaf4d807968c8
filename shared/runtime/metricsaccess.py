"""Who may read a service's ``/metrics``: anyone, or (``CDO_METRICS_AUTH=true``, in prod) only
callers the API server authenticates and authorises.

With authorisation on, a request must carry ``Authorization: Bearer <token>``; the token is
reviewed (TokenReview, the API server's own audiences) and the user it stands for must be
allowed ``get`` on the non-resource URL ``/metrics`` (SubjectAccessReview): what
controller-runtime's ``WithAuthenticationAndAuthorization`` filter and kube-rbac-proxy do. The
ClusterRole ``cdo-metrics-reader`` grants it; bind it to your scraper. Answers:

- 401 without a token, or with one the API server does not accept;
- 403 when the user may not (the body names the user and the rule it lacks);
- 503 while the service has no API client yet, or the API server cannot answer: never open.

A decision is kept for a while per token (allowed 2 minutes, refused 30 seconds, as
kube-rbac-proxy's caches do), so a scraper costs two reviews per token and period, not per
scrape. Every refusal is counted (``cdo_metrics_access_refused_total`` by reason) and logged,
except one answered again from the kept decision (counted only).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from shared.kube.client import KubeClient
from shared.kube.reviews import (
    NotAuthenticatedError,
    ReviewFailedError,
    access_review,
    review_token,
)

log = logging.getLogger("cdo.metrics")

PATH = "/metrics"
VERB = "get"
READER_ROLE = "cdo-metrics-reader"
"""The ClusterRole deploy/ ships that grants get on /metrics."""
ALLOWED_TTL_S = 120.0
REFUSED_TTL_S = 30.0
MAX_KEPT = 1024


@dataclass(frozen=True, slots=True)
class Verdict:
    status: int
    """200 to serve; 401, 403 or 503 with ``message`` as the body."""
    message: str = ""
    reason: str = ""
    """``unauthenticated``, ``forbidden`` or ``unavailable`` for a refusal (the counter's label)."""


OPEN = Verdict(status=200)


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None without one (pure)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def forbidden(username: str, reason: str) -> Verdict:
    message = (
        f'forbidden: user "{username}" cannot {VERB} path "{PATH}": no RBAC rule grants it '
        f"(metrics access policy CDO_METRICS_AUTH: ClusterRole {READER_ROLE} grants it)"
    )
    if reason:
        message += f"; the authorizer said: {reason}"
    return Verdict(status=403, message=message, reason="forbidden")


class MetricsAccess:
    """The gate in front of ``/metrics`` (:meth:`check` per request)."""

    def __init__(
        self,
        *,
        required: bool,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.required = required
        self._client: KubeClient | None = None
        self._clock = clock
        self._kept: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()
        self._refused = Counter(
            "cdo_metrics_access_refused",
            "Requests for /metrics refused, by reason: unauthenticated (no token, or one the "
            "API server does not accept), forbidden (the user may not get /metrics), "
            "unavailable (no answer from the API server).",
            ["reason"],
            registry=registry,
        )

    def use(self, client: KubeClient) -> None:
        """Review tokens through ``client`` (the service's own identity, which may create
        TokenReviews and SubjectAccessReviews)."""
        self._client = client

    async def check(self, authorization: str | None) -> Verdict:
        """What to answer a request with this ``Authorization`` header."""
        if not self.required:
            return OPEN
        token = bearer_token(authorization)
        if token is None:
            return self._refuse(
                Verdict(
                    status=401,
                    message="unauthorized: /metrics needs Authorization: Bearer <token>",
                    reason="unauthenticated",
                )
            )
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        kept = self._kept.get(key)
        if kept is not None and kept[0] > now:
            verdict = kept[1]
            if verdict.status != 200:
                self._refused.labels(verdict.reason).inc()
            return verdict
        verdict = await self._review(token)
        if verdict.status in (200, 401, 403):
            ttl = ALLOWED_TTL_S if verdict.status == 200 else REFUSED_TTL_S
            self._kept[key] = (now + ttl, verdict)
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
        return verdict if verdict.status == 200 else self._refuse(verdict)

    async def _review(self, token: str) -> Verdict:
        client = self._client
        if client is None:
            return Verdict(
                status=503,
                message="metrics access is not ready: no API client to review tokens yet",
                reason="unavailable",
            )
        try:
            user = await review_token(client, token)
            decision = await access_review(client, user, path=PATH, verb=VERB)
        except NotAuthenticatedError as exc:
            return Verdict(
                status=401, message=f"unauthorized: token refused: {exc}", reason="unauthenticated"
            )
        except ReviewFailedError as exc:
            return Verdict(
                status=503, message=f"metrics access unavailable: {exc}", reason="unavailable"
            )
        if not decision.allowed:
            return forbidden(user.username, decision.reason)
        return OPEN

    def _refuse(self, verdict: Verdict) -> Verdict:
        self._refused.labels(verdict.reason).inc()
        log.warning(
            "metrics request refused",
            extra={"status": verdict.status, "reason": verdict.reason, "error": verdict.message},
        )
        return verdict
