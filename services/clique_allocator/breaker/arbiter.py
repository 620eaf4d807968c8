"""The circuit breaker's arbiter, run by the clique allocator's leader: Nodes in, verdicts out.

    arbiter = BreakerArbiter(nodes=caches.nodes, reader=client, writer=leader_client,
                             settings=settings.breaker, rulings=metrics.breaker_rulings)
    loops.create_task(arbiter.run())        # only while leading

Every health monitor reads only its own Node (docs/health-monitor.md, "Circuit breaker"): it
claims NoExecute with a ``pending`` record there, and this arbiter, which sees every Node
through the allocator's Node informer, answers on that Node (the ``cdo.dev/gpu-fault-breaker-
verdict`` annotation, a JSON merge patch through the leader's fenced client). The decisions are
``rulings.arbitrate`` (pure); here:

- **one clock**: every stamp another node wrote (a record's ``at``, a verdict's claim) is
  replaced by the moment this process first saw it on its own monotonic clock
  (shared/sightings.py), so ``now - at`` is a duration here, whatever the nodes' clocks say; a
  new leader sees every record afresh (it counts others longer, never less);
- **reservations**: the grants and offers this leader made count from the moment it made them
  (a grant for its window, an offer for the claim timeout), whether or not the Node shows them
  yet; so does every NoExecute taint or granted record it sees appear, for the window from
  then, even once it is gone;
- **a fresh read before the first answer**: a new leader lists every Node from the server, so
  the grants its predecessor wrote count even if its informer has not delivered them yet;
- **cheap per change**: the informer's handler only notes Nodes whose breaker facts changed
  (taint, record, verdict, clique, monitored); a kubelet's status report wakes nothing.
  An evaluation walks every Node, and runs only when a claim, a hold or an expiry needs one.

A verdict that no longer answers anything (the record is gone, or granted and acted on) is
removed by the arbiter, so a healthy fleet carries no breaker annotation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

import msgspec
from prometheus_client import Counter

from services.clique_allocator.breaker.rulings import Ruling, arbitrate
from services.clique_allocator.breaker.settings import BreakerSettings
from shared.breaker import Peer, RecordState, encode_verdict, expires_at, grant_hold_s, peer_of
from shared.crds.names import BREAKER_VERDICT_ANNOTATION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import NODES
from shared.sightings import Sightings

log = logging.getLogger("cdo.clique_allocator.breaker")


class NodeSource(Protocol):
    """The allocator's Node informer, as the arbiter uses it."""

    def add_handler(self, handler: Callable[[Node | None, Node | None], None]) -> None: ...

    async def wait_synced(self) -> None: ...


class _NodeList(msgspec.Struct):
    items: list[Node]


_node_list = msgspec.json.Decoder(_NodeList)


def _took_no_execute(before: Peer | None, after: Peer) -> bool:
    """The node carries NoExecute, or a granted record, that it did not a moment ago."""

    def holding(peer: Peer | None) -> bool:
        return peer is not None and (
            peer.no_execute
            or (peer.record is not None and peer.record.state is RecordState.GRANTED)
        )

    return holding(after) and not holding(before)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class BreakerArbiter:
    """Answers the health monitors' claims for NoExecute; see the module docstring."""

    def __init__(
        self,
        *,
        nodes: NodeSource,
        reader: KubeClient,
        writer: KubeClient,
        settings: BreakerSettings,
        rulings: Counter,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._nodes = nodes
        self._reader = reader
        self._writer = writer
        self._settings = settings
        self._clock = clock
        self._wall = wall_clock
        self._peers: dict[str, Peer] = {}  # as the Nodes say, stamps as written
        self._seen: Sightings[tuple[str, str, datetime]] = Sightings(clock)
        self._reserved: dict[str, float] = {}  # node -> monotonic end of its reservation
        # node -> the record (state, at) it last answered, until the Node shows the answer
        self._answered: dict[str, tuple[RecordState, datetime]] = {}
        self._dirty = asyncio.Event()
        self._rulings = rulings
        nodes.add_handler(self._on_node)

    # -- the informer's handler ---------------------------------------------------------------

    def _on_node(self, old: Node | None, new: Node | None) -> None:
        current = new if new is not None else old
        if current is None:
            return
        name = current.metadata.name
        if new is None:
            if self._peers.pop(name, None) is not None:
                self._dirty.set()
            return
        peer = peer_of(new)
        before = self._peers.get(name)
        if before != peer:
            self._peers[name] = peer
            self._sight(peer)
            if _took_no_execute(before, peer):
                self._reserve(name, self._settings.window_s)
            self._dirty.set()

    def _reserve(self, name: str, seconds: float) -> None:
        end = self._clock() + seconds
        self._reserved[name] = max(end, self._reserved.get(name, end))

    def _sight(self, peer: Peer) -> None:
        """Start timing a Node's stamps the moment this process sees them."""
        if peer.record is not None:
            self._seen.age_s((peer.name, peer.record.state, peer.record.at))
        if peer.granted_at is not None:
            self._seen.age_s((peer.name, "verdict", peer.granted_at))

    # -- leading ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Answer claims until cancelled (only while this replica leads)."""
        await self._nodes.wait_synced()
        await self._read_fresh()
        log.info("circuit breaker arbiter answering", extra={"nodes": len(self._peers)})
        while True:
            await self._evaluate()
            await self._wait()

    async def _read_fresh(self) -> None:
        """Every Node from the server, not the informer: a predecessor's last grants count."""
        listing = _node_list.decode(await self._reader.list(NODES))
        for node in listing.items:
            self._on_node(None, node)

    async def _wait(self) -> None:
        self._dirty.clear()
        delay = self._next_change_s()
        if delay is None:
            await self._dirty.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._dirty.wait()

    # -- an evaluation ------------------------------------------------------------------------

    def timed(self, now: datetime) -> dict[str, Peer]:
        """The Peers with every stamp replaced by when this process first saw it."""
        timed: dict[str, Peer] = {}
        keep: list[tuple[str, str, datetime]] = []
        for name, peer in self._peers.items():
            record, granted_at = peer.record, peer.granted_at
            if record is not None:
                key = (name, str(record.state), record.at)
                keep.append(key)
                record = msgspec.structs.replace(record, at=now - self._age(key))
            if granted_at is not None:
                key = (name, "verdict", granted_at)
                keep.append(key)
                granted_at = now - self._age(key)
            timed[name] = msgspec.structs.replace(peer, record=record, granted_at=granted_at)
        self._seen.retain(keep)
        return timed

    def _age(self, key: tuple[str, str, datetime]) -> timedelta:
        return timedelta(seconds=self._seen.age_s(key))

    def _open(self) -> tuple[list[tuple[str, datetime]], list[tuple[str, datetime]]]:
        """Claims without an answer (oldest sighting first) and held nodes without an offer
        of room (oldest hold first)."""
        claims: list[tuple[float, str, datetime]] = []
        held: list[tuple[datetime, str, datetime]] = []
        for name, peer in self._peers.items():
            record = peer.record
            if record is None or self._answered.get(name) == (record.state, record.at):
                continue  # nothing to answer, or answered and not yet seen on the Node
            if record.state is RecordState.PENDING and peer.verdict is None:
                age = self._seen.age_s((name, str(record.state), record.at))
                claims.append((-age, name, record.at))
            elif record.state is RecordState.HELD and not (
                peer.verdict is not None and peer.verdict.room
            ):
                held.append((record.held_since or record.at, name, record.at))
        return (
            [(name, at) for _, name, at in sorted(claims)],
            [(name, at) for _, name, at in sorted(held)],
        )

    async def _evaluate(self) -> None:
        mono = self._clock()
        self._reserved = {name: end for name, end in self._reserved.items() if end > mono}
        claims, held = self._open()
        stale = self._stale({name for name, _ in [*claims, *held]})
        if not claims and not held and not stale:
            return
        now = self._wall()
        rulings = arbitrate(
            peers=self.timed(now),
            claims=claims,
            held=held,
            reserved=set(self._reserved),
            now=now,
            caps=self._settings,
        )
        for ruling in rulings:
            self._note(ruling, mono)
        for ruling in rulings:
            await self._write(ruling.node, encode_verdict(ruling.verdict))
        answered = {ruling.node for ruling in rulings}
        for name in stale:
            if name not in answered:
                await self._write(name, None)

    def _note(self, ruling: Ruling, mono: float) -> None:
        """Count the answer from now on, before it is written."""
        name = ruling.node
        answers = RecordState.HELD if ruling.verdict.room else RecordState.PENDING
        self._answered[name] = (answers, ruling.verdict.claim)
        peer = self._peers.get(name)
        record = peer.record if peer is not None else None
        if ruling.verdict.room:
            self._reserved[name] = mono + self._settings.claim_timeout_s
        elif ruling.reserves:
            hold = grant_hold_s(record, self._settings)
            self._reserved[name] = mono + max(hold, self._settings.window_s)
        else:
            self._reserved.pop(name, None)
        result = "offered" if ruling.verdict.room else "granted" if ruling.reserves else "refused"
        self._rulings.labels(result).inc()
        if result == "refused":
            log.warning(
                "NoExecute refused by the circuit breaker",
                extra={"node": name, "cap": ruling.verdict.admission(seen_at=self._wall())},
            )

    def _stale(self, answered: set[str]) -> list[str]:
        """Nodes whose verdict answers nothing open any more (and gets no new one now)."""
        return [
            name
            for name, peer in self._peers.items()
            if peer.stale_verdict and name not in answered
        ]

    async def _write(self, node: str, text: str | None) -> None:
        body = {"metadata": {"annotations": {BREAKER_VERDICT_ANNOTATION: text}}}
        try:
            await self._writer.patch(NODES, node, body)
        except KubeApiError as exc:
            if exc.not_found:
                return  # the Node is gone: nothing to answer
            # The reservation stands; the claimant claims again and is answered again.
            self._answered.pop(node, None)
            self._dirty.set()
            log.warning(
                "could not write the circuit breaker's verdict",
                extra={"node": node, "error": str(exc)},
            )

    def _next_change_s(self) -> float | None:
        """Seconds until an evaluation may answer differently by time alone."""
        mono = self._clock()
        moments = [end - mono for end in self._reserved.values()]
        if any(
            peer.record is not None and peer.record.state is RecordState.HELD
            for peer in self._peers.values()
        ):
            now = self._wall()
            for peer in self.timed(now).values():
                moment = expires_at(peer, now=now, caps=self._settings)
                if moment is not None:
                    moments.append((moment - now).total_seconds())
        later = [moment for moment in moments if moment > 0]
        return min(later) if later else None
