"""The authenticator: answers nats-server's authorization requests with scoped users.

One request, one answer (see ``protocol`` for the exchange)::

    request = parse_request(msg.data, ...)     # malformed: counted, dropped, never answered
    reviewed = await review(kube, token, ...)  # TokenReview: who the token is, until when
    decision = permissions_for(policy, identity)
    reply = response(request, user=user_jwt(...))  or  response(request, error=...)

Requests are queued and answered by a few workers at once, so a burst of reconnects (a server
restart with thousands of nodes) is not reviewed one token at a time. A request the queue has
no room for is dropped and counted; the server refuses that client when its auth timeout
passes, and the client connects again.

Every outcome is counted in ``cdo_nats_auth_requests_total{result}``: ``authorized``,
``unauthenticated`` (no token, or the review refused it: expired, forged, deleted
ServiceAccount or pod), ``forbidden`` (a real identity without NATS permissions),
``review_failed`` (the API could not answer), ``malformed`` and ``overloaded``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from services.nats_auth import nkeyjwt
from services.nats_auth.permissions import Identity, Policy, Refused, permissions_for
from services.nats_auth.protocol import (
    CALLOUT_SUBJECT,
    AuthorizationRequest,
    MalformedRequestError,
    parse_request,
    response,
    user_jwt,
)
from services.nats_auth.review import (
    NotAuthenticatedError,
    Reviewed,
    ReviewFailedError,
)

log = logging.getLogger("cdo.nats_auth")

RESULTS = (
    "authorized",
    "unauthenticated",
    "forbidden",
    "review_failed",
    "malformed",
    "overloaded",
)


class Reviewer(Protocol):
    async def __call__(self, token: str) -> Reviewed: ...


class Message(Protocol):
    """What the authenticator reads of a received NATS message."""

    @property
    def data(self) -> bytes: ...

    @property
    def reply(self) -> str: ...


class Connection(Protocol):
    async def publish(self, subject: str, payload: bytes = b"") -> None: ...


class CalloutMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "cdo_nats_auth_requests",
            "Authorization requests from nats-server, by result.",
            ["result"],
            registry=registry,
        )
        for result in RESULTS:
            self.requests.labels(result=result)


def user_name(identity: Identity, role: str = "") -> str:
    """The name the server shows for the connection (connz, and its log of every refused
    publish): the identity, and the policy's role that set its permissions."""
    name = f"{identity.namespace}/{identity.service_account}"
    name = f"{name}@{identity.node}" if identity.node else name
    return f"{name} ({role})" if role else name


class Authenticator:
    """Answers authorization requests on ``connection`` for ``policy``'s identities."""

    subject = CALLOUT_SUBJECT
    """Where the server sends its requests (subscribe :meth:`receive` to it)."""

    def __init__(
        self,
        *,
        connection: Connection,
        reviewer: Reviewer,
        signer: nkeyjwt.Signer,
        policy: Policy,
        account: str,
        metrics: CalloutMetrics,
        max_user_lifetime_s: int = 3600,
        workers: int = 32,
        queue_size: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._connection = connection
        self._review = reviewer
        self._signer = signer
        self._policy = policy
        self._account = account
        self._metrics = metrics
        self._max_lifetime = max_user_lifetime_s
        self._workers = workers
        self._queue: asyncio.Queue[Message] = asyncio.Queue(maxsize=queue_size)
        self._clock = clock

    @property
    def issuer(self) -> str:
        """The issuer account's public key (the server's ``auth_callout.issuer``)."""
        return self._signer.public_key

    async def receive(self, msg: Message) -> None:
        """The subscription's callback: queue the request for a worker."""
        try:
            self._queue.put_nowait(msg)
        except asyncio.QueueFull:
            self._count("overloaded")
            log.warning("nats auth request dropped: queue full")

    async def run(self) -> None:
        """Answer queued requests until cancelled."""
        async with asyncio.TaskGroup() as group:
            for index in range(self._workers):
                group.create_task(self._worker(), name=f"nats-auth-worker-{index}")

    async def _worker(self) -> None:
        while True:
            msg = await self._queue.get()
            try:
                await self.handle(msg)
            finally:
                self._queue.task_done()

    async def handle(self, msg: Message) -> None:
        """Answer one request (a malformed one is counted and dropped)."""
        try:
            request = parse_request(msg.data, issuer=self.issuer, now=self._clock())
        except MalformedRequestError as exc:
            self._count("malformed")
            log.warning("malformed nats auth request dropped", extra={"error": str(exc)})
            return
        if not msg.reply:
            self._count("malformed")
            log.warning("nats auth request without a reply subject dropped")
            return
        answer = await self.answer(request)
        await self._connection.publish(msg.reply, answer)

    async def answer(self, request: AuthorizationRequest) -> bytes:
        """The signed response for ``request``: a scoped user, or why it gets none."""
        token = request.connect_opts.auth_token
        client = request.client_info
        if not token:
            return self._refuse(request, "unauthenticated", "no token")
        try:
            reviewed = await self._review(token)
        except NotAuthenticatedError as exc:
            return self._refuse(request, "unauthenticated", f"token refused: {exc}")
        except ReviewFailedError as exc:
            return self._refuse(request, "review_failed", str(exc))
        decision = permissions_for(self._policy, reviewed.identity)
        if isinstance(decision, Refused):
            return self._refuse(request, "forbidden", decision.reason)
        now = self._clock()
        expires = int(now) + self._max_lifetime
        if reviewed.expires is not None:
            expires = min(expires, reviewed.expires)
        if expires <= now:
            return self._refuse(request, "unauthenticated", "token refused: expired")
        name = user_name(reviewed.identity, decision.role)
        user = user_jwt(
            request,
            decision,
            signer=self._signer,
            account=self._account,
            name=name,
            expires=expires,
            now=now,
        )
        self._count("authorized")
        log.info(
            "nats user authorized",
            extra={"user": name, "client": client.name, "host": client.host, "expires": expires},
        )
        return response(request, signer=self._signer, now=now, user=user)

    def _refuse(self, request: AuthorizationRequest, result: str, reason: str) -> bytes:
        self._count(result)
        client = request.client_info
        log.warning(
            "nats user refused",
            extra={"reason": reason, "client": client.name, "host": client.host},
        )
        return response(request, signer=self._signer, now=self._clock(), error=reason)

    def _count(self, result: str) -> None:
        self._metrics.requests.labels(result=result).inc()
