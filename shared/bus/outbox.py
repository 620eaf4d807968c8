"""Events kept until the JetStream stream acknowledges them: at-least-once into the stream.

Every event goes out as a NATS publish with a reply subject; JetStream answers a message it
captured with a PubAck (``{"stream": ..., "seq": ..., "duplicate": ...}``) on that subject.
Publishes are pipelined: many are in flight at once, and their acks come back on one wildcard
inbox subscription, matched to the event by the reply subject's last token. An event stays in
the outbox until its ack arrives; one not acknowledged within the ack timeout (the server went
away, the connection was down, the ack was lost) is sent again, unchanged, with the same
``Nats-Msg-Id``, so the stream's duplicate window stores it once.

- **Disconnected:** an event published while the connection is down (or before it was ever
  made) is kept unsent; :meth:`Outbox.send_all` sends everything kept when a connection is
  (re)made, as fresh sends.
- **Full outbox:** while connected, the publisher waits for room (acks arrive within a round
  trip, so a burst is paced by the stream), at most one ack timeout; while disconnected, or
  when that wait runs out, the oldest event is dropped and counted, so a long outage never
  stalls the service.
- **No stream captures the subject** (the server answers "no responders"): after
  :data:`NO_STREAM_ANSWERS` such answers the event counts as ``no_stream`` and leaves the outbox;
  live subscribers had it, as with a plain publish. A stream still loading after a server
  restart answers the same way for a moment, hence more than one answer.
- **No answer at all** after :data:`MAX_SENDS` sends (the subject has live subscribers but no
  stream, so nobody answers): counted as ``unanswered`` and let go. Re-sends are made only while
  connected, so an outage of any length is waited out.
- **Rejected** (a PubAck with an error): logged, counted and not retried, as it would be again.
- **Plain** (:attr:`Outbox.plain`, set while the server has no stream for the bus): an event
  leaves the outbox once sent, without a reply subject, as a plain publish; only those kept
  while disconnected wait in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import msgspec
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.metrics import Metrics

log = logging.getLogger("cdo.bus")

SendFn = Callable[[str, bytes, bytes, str], Awaitable[None]]
"""Publishes (subject, header block, payload, reply subject)."""
SubscribeFn = Callable[[str, Callable[[Msg], Awaitable[None]]], Awaitable[Subscription]]
"""Subscribes a callback to a subject."""

NO_STREAM_ANSWERS = 3
""""No responders" answers after which an event is taken as one no stream captures."""
MAX_SENDS = 5
"""Sends of one event after which an event nobody answers is let go."""
NO_RESPONDERS = "503"

Outcome = Literal["stored", "duplicate", "no_stream", "rejected", "malformed", "unanswered"]
OUTCOMES: tuple[Outcome, ...] = (
    "stored",
    "duplicate",
    "no_stream",
    "rejected",
    "malformed",
    "unanswered",
)


class _ApiError(msgspec.Struct):
    code: int = 0
    description: str = ""


class _PubAck(msgspec.Struct):
    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: _ApiError | None = None


_ACK_DECODER = msgspec.json.Decoder(_PubAck)


def ack_outcome(headers: Mapping[str, str] | None, data: bytes) -> tuple[Outcome, str]:
    """What one answer to a publish says, and the error text of a rejection (pure)."""
    if headers and headers.get("Status") == NO_RESPONDERS:
        return "no_stream", ""
    try:
        ack = _ACK_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return "malformed", str(exc)
    if ack.error is not None:
        return "rejected", f"{ack.error.code}: {ack.error.description}"
    if not ack.stream or ack.seq <= 0:
        return "malformed", "no stream and sequence"
    return ("duplicate" if ack.duplicate else "stored"), ""


@dataclass(slots=True)
class _Pending:
    subject: str
    block: bytes
    payload: bytes
    sent_at: float
    sends: int = 0
    no_stream: int = 0


class Outbox:
    """Events awaiting their PubAck; re-sends what is not acknowledged in time."""

    def __init__(
        self,
        *,
        send: SendFn,
        metrics: Metrics,
        capacity: int,
        ack_timeout_s: float,
        connected: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._metrics = metrics
        self._capacity = capacity
        self._timeout = ack_timeout_s
        self._clock = clock
        self._connected = connected
        # Ordered by last send: re-sent events move to the end, so the due ones lead.
        self._pending: dict[str, _Pending] = {}
        self._tokens = map(str, itertools.count(1))
        self._prefix = ""
        self._subscription: Subscription | None = None
        self._empty = asyncio.Event()
        self._empty.set()
        self._room = asyncio.Event()
        self._overflowing = False
        self._acks = {outcome: metrics.publish_acks.labels(outcome) for outcome in OUTCOMES}
        metrics.outbox_events.set_function(lambda: len(self._pending))
        self.plain = False
        """Send without waiting for an ack (the server has no stream for these events)."""

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def start(self, inbox: str, subscribe: SubscribeFn) -> None:
        """Receive the acks on ``inbox``'s wildcard (call once, when connected)."""
        self._prefix = inbox + "."
        self._subscription = await subscribe(inbox + ".*", self._on_ack)

    async def publish(self, subject: str, block: bytes, payload: bytes) -> None:
        """Send an event and keep it until acknowledged; while disconnected, only keep it. A
        send that fails (the connection went away, its reconnect buffer is full) raises after
        the event is kept for a re-send."""
        if len(self._pending) >= self._capacity:
            await self._make_room()
        token = next(self._tokens)
        entry = self._pending[token] = _Pending(subject, block, payload, self._clock())
        self._empty.clear()
        if self._connected():
            await self._transmit(token, entry)

    async def _transmit(self, token: str, entry: _Pending) -> None:
        entry.sends += 1
        entry.sent_at = self._clock()
        if self.plain:
            await self._send(entry.subject, entry.block, entry.payload, "")
            self._done(token)
        else:
            await self._send(entry.subject, entry.block, entry.payload, self._prefix + token)

    async def send_all(self) -> int:
        """Send every kept event now, oldest first, as fresh sends (a connection was made:
        earlier sends went to one that is gone); how many."""
        tokens = list(self._pending)
        for token in tokens:
            entry = self._pending.pop(token, None)
            if entry is None:
                continue
            entry.sends = 0
            entry.no_stream = 0
            self._pending[token] = entry  # to the end: ordered by last send
            await self._transmit(token, entry)
        return len(tokens)

    async def _make_room(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while len(self._pending) >= self._capacity and self._connected():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), remaining)
        if len(self._pending) < self._capacity:
            return
        token = next(iter(self._pending))
        dropped = self._pending.pop(token)
        self._metrics.outbox_dropped.inc()
        if not self._overflowing:  # once per episode, not per event
            self._overflowing = True
            log.warning("outbox full, dropping oldest events", extra={"subject": dropped.subject})

    async def _on_ack(self, msg: Msg) -> None:
        token = msg.subject[len(self._prefix) :]
        entry = self._pending.get(token)
        if entry is None:
            return  # the ack of an earlier send of an event already acknowledged
        outcome, error = ack_outcome(msg.headers, msg.data)
        if outcome == "no_stream":
            entry.no_stream += 1
            if entry.no_stream < NO_STREAM_ANSWERS:
                return  # re-sent when its ack timeout passes
        elif outcome == "malformed":
            self._acks[outcome].inc()
            log.warning("malformed publish ack", extra={"subject": entry.subject, "error": error})
            return
        elif outcome == "rejected":
            log.warning("stream rejected event", extra={"subject": entry.subject, "error": error})
        self._acks[outcome].inc()
        self._done(token)

    def _done(self, token: str) -> None:
        if self._pending.pop(token, None) is None:
            return
        self._room.set()
        if not self._pending:
            self._empty.set()
            self._overflowing = False

    def due(self, now: float) -> list[str]:
        """Tokens of the events whose ack is overdue at ``now``, oldest send first."""
        deadline = now - self._timeout
        tokens: list[str] = []
        for token, entry in self._pending.items():
            if entry.sent_at > deadline:
                break
            tokens.append(token)
        return tokens

    async def resend_due(self) -> int:
        """Send every overdue event again (same bytes, same ``Nats-Msg-Id``); how many."""
        now = self._clock()
        tokens = self.due(now)
        for token in tokens:
            entry = self._pending.pop(token, None)
            if entry is None:
                continue
            if entry.sends >= MAX_SENDS:
                self._acks["unanswered"].inc()
                log.warning("event never acknowledged", extra={"subject": entry.subject})
                self._pending[token] = entry
                self._done(token)
                continue
            self._pending[token] = entry
            self._metrics.publish_retries.inc()
            await self._transmit(token, entry)
        return len(tokens)

    async def run(self) -> None:
        """Re-send overdue events while connected, until cancelled."""
        tick = max(self._timeout / 4, 0.01)
        while True:
            await asyncio.sleep(tick)
            if not self._connected():
                continue
            try:
                await self.resend_due()
            except Exception as exc:  # the connection went away mid-way: next tick
                log.debug("outbox re-send failed", extra={"error": str(exc)})

    async def settled(self, wait_s: float) -> bool:
        """Wait until every event is acknowledged, at most ``wait_s`` seconds; whether it is."""
        try:
            await asyncio.wait_for(self._empty.wait(), wait_s)
        except TimeoutError:
            return False
        return True
