"""A test service that publishes a scripted ComputeDomain story on the bus.

It runs under the same runtime as every cdo service (settings from CDO_*, probes, metrics,
tracing, supervision), and publishes the kinds of events the services do: clique capacity,
membership moving from Pending to Ready, per-node IMEX state, a fault and its recovery. The
runtime's lifecycle tests and the cross-process tracing test run it as a real process, so they
exercise the runtime without a Kubernetes API.

    CDO_NATS_URL=nats://127.0.0.1:4222 python -m tests.support.eventgen --interval 0.5 --count 20
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import uuid
from collections.abc import Iterator

from shared.events import (
    CliqueCapacity,
    DomainMember,
    DomainMembershipChanged,
    Event,
    ImexPeer,
    NodeCapacity,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)
from shared.runtime import ServiceContext, run_service

log = logging.getLogger("cdo.eventgen")

CLUSTER_UUID = str(uuid.UUID("2f1c8a52-7d6b-4cf1-9e0a-56c3c9e0b1a4"))
CLIQUE = f"{CLUSTER_UUID}.1"
NODES = tuple(f"gb200-r1-n{slot:02d}" for slot in range(4))


def story() -> Iterator[Event]:
    """One pass of the scripted story (a small 4-node domain in one clique)."""
    free = dict.fromkeys(NODES, 4)
    yield capacity(free)
    yield membership("Pending", members=())
    members = tuple(
        DomainMember(node=node, index=slot, address=f"127.0.1.{slot + 1}", pods=1, gpus=4)
        for slot, node in enumerate(NODES)
    )
    yield membership("Placed", members=members)
    yield capacity(dict.fromkeys(NODES, 0))
    for node in NODES:
        yield imex(node, "READY", "UP")
    ready = tuple(
        DomainMember(node=m.node, index=m.index, address=m.address, pods=1, gpus=4, status="Ready")
        for m in members
    )
    yield membership("Ready", members=ready)
    yield NodeFault(
        node=NODES[2],
        clique=CLIQUE,
        gpus=(f"GPU-{NODES[2]}-2",),
        signal="xid",
        code=79,
        severity="fatal",
        action="drain_node",
        message="GPU has fallen off the bus",
    )
    yield imex(NODES[0], "READY", "DEGRADED")
    yield membership("Degraded", members=ready, reason="node gb200-r1-n02 has a fatal GPU fault")
    yield NodeRecovered(node=NODES[2], clique=CLIQUE, signals=("xid",), message="GPU reset")
    yield imex(NODES[0], "READY", "UP")
    yield membership("Ready", members=ready)


def capacity(free: dict[str, int]) -> CliqueCapacity:
    nodes = tuple(
        NodeCapacity(node=node, slot=slot, gpus_total=4, gpus_free=free[node])
        for slot, node in enumerate(NODES)
    )
    return CliqueCapacity(
        clique=CLIQUE,
        cluster_uuid=CLUSTER_UUID,
        nodes=nodes,
        gpus_total=4 * len(NODES),
        gpus_free=sum(free.values()),
        domains=0 if sum(free.values()) == 4 * len(NODES) else 1,
        channels_free=2047,
    )


def membership(phase: str, *, members: tuple[DomainMember, ...], reason: str = "") -> Event:
    return DomainMembershipChanged(
        namespace="default",
        name="training-domain-1",
        phase=phase,
        clique=CLIQUE if members else "",
        channel=1 if members else None,
        size=len(NODES),
        members=members,
        reason=reason,
    )


def imex(node: str, daemon: str, domain: str) -> NodeImexState:
    peers = tuple(
        ImexPeer(node=peer, address=f"127.0.1.{slot + 1}", state="CONNECTED")
        for slot, peer in enumerate(NODES)
        if peer != node
    )
    return NodeImexState(
        node=node, clique=CLIQUE, daemon_state=daemon, domain_state=domain, peers=peers
    )


async def publish_story(ctx: ServiceContext, *, interval: float, count: int) -> None:
    """Publish the story in a loop; after ``count`` events (0: never) idle until stopped."""
    events = itertools.cycle(story())
    published = 0
    while count == 0 or published < count:
        event = next(events)
        try:
            await ctx.bus.publish(event)
            published += 1
            log.info("published", extra={"type": event.ce_type(), "count": published})
        except Exception as exc:  # e.g. the connection is being re-established
            ctx.metrics.errors.labels("eventgen").inc()
            log.warning("publish failed", extra={"error": f"{type(exc).__name__}: {exc}"})
        await asyncio.sleep(interval)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="Publish a scripted ComputeDomain story.")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between events")
    parser.add_argument("--count", type=int, default=0, help="events to publish (0: forever)")
    args = parser.parse_args()

    async def setup(ctx: ServiceContext) -> None:
        ctx.supervisor.start(
            "publish-story", publish_story(ctx, interval=args.interval, count=args.count)
        )

    raise SystemExit(run_service("eventgen", setup))


if __name__ == "__main__":
    main()
