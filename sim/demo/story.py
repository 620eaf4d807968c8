"""The story on a running system, act by act, and what it measured.

The seed act (here): apply the two example manifests and wait for the domain to be Ready; inject
a fatal XID on one member node and follow the eviction, the degraded domain, the GPU reset and
the recovery, counting the fewest IMEX-ready nodes meanwhile. The fabric act follows with the
same domain (:mod:`sim.demo.failover`: its rack loses its fabric, the domain fails over to the
other rack, the fabric comes back); then the seed's workload and domain are deleted and the demo
waits until their GPUs are free. The multi-clique act that follows, one domain over both racks,
is :mod:`sim.demo.spanning`. :func:`tell` runs the acts and returns the
:class:`~sim.demo.summary.Summary`, with the IMEX daemon restarts the node host counted from
the start of the story to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from opentelemetry.trace import Tracer

from shared.command_errors import CommandError
from shared.kube.client import KubeClient
from sim import control as simctl
from sim.demo import kubectl
from sim.demo.bringup import Running
from sim.demo.eventfeed import EventFeed
from sim.demo.failover import lose_the_rack, stuck_slice
from sim.demo.monitor import Monitor, StoryError, following
from sim.demo.observe import ClusterView, DomainView, Target
from sim.demo.progress import trace_id_of
from sim.demo.restarts import read_counts, restarts_phrase
from sim.demo.screen import Screen
from sim.demo.spanning import span_both_racks
from sim.demo.summary import Summary
from sim.demo.tally import Tally

MANIFESTS = (kubectl.EXAMPLES / "training-domain-1.yaml", kubectl.EXAMPLES / "llm-training.yaml")
TARGET = Target(
    namespace="default", domain="training-domain-1", selector="app=llm-training", replicas=18
)
"""What :data:`MANIFESTS` create (kept in step with them by the demo's test)."""

XID = 74
"""An NVLink error: fatal, and about the tray's NVLink links every GPU uses, so node-level: the
node is drained (NoExecute taint). A fault of one GPU alone (XID 79, say) would evict only the
pod holding that GPU (docs/health-monitor.md)."""


@dataclass(frozen=True)
class Timeouts:
    step_s: float = 120.0


def pick_member(members: Sequence[str]) -> str:
    """The member node the fault hits: the middle one in slot order, nothing special about it."""
    if not members:
        raise StoryError("the Ready domain lists no member nodes")
    return members[len(members) // 2]


async def apply_manifests(kubeconfig: str, annotations: dict[str, str]) -> list[str]:
    """``kubectl apply`` of the seed's manifests, the files as they are (the ComputeDomain
    annotated on its way in with ``annotations``, when given: :mod:`sim.demo.kubectl`)."""
    return await kubectl.apply(kubeconfig, MANIFESTS, annotations)


async def _fault(
    running: Running, node: str, body: dict[str, object] | None, screen: Screen
) -> None:
    try:
        await asyncio.to_thread(simctl.fault, running.state_dir, node, body, say=screen.live)
    except CommandError as exc:
        raise StoryError(
            f"the node host refused the fault: {exc}", logs=[running.log("nodehost")]
        ) from exc


@contextlib.asynccontextmanager
async def _connected(
    running: Running, screen: Screen, tally: Tally
) -> AsyncIterator[tuple[KubeClient, EventFeed]]:
    client = await KubeClient.connect(kubeconfig=running.kubeconfig, request_timeout_s=10)
    try:
        async with EventFeed(
            running.nats_url,
            tally=tally,
            show=screen.live,
            since=datetime.now(UTC),
            token_file=running.nats_token_file,
        ) as feed:
            yield client, feed
    finally:
        await client.close()


def _degraded(view: ClusterView) -> DomainView | None:
    domain = view.domain
    return domain if domain is not None and domain.phase == "Degraded" else None


def _replacement(view: ClusterView) -> str | None:
    """Why the replacement pod waits, or ``placed`` if it did not have to."""
    pods = view.pods
    if pods.waiting:
        return pods.waiting
    return "placed" if pods.gated == 0 and pods.total == TARGET.replicas else None


async def tell(
    running: Running, *, screen: Screen, tracer: Tracer, timeouts: Timeouts = Timeouts()
) -> Summary:
    tally = Tally(namespace=TARGET.namespace, domain=TARGET.domain)
    step_s = timeouts.step_s
    baseline = await read_counts(running)
    async with _connected(running, screen, tally) as (client, feed):
        async with following(client, TARGET, screen) as monitor:
            seed = await _seed_act(
                running, monitor, feed, screen=screen, tracer=tracer, step_s=step_s
            )
            screen.note(
                "IMEX daemon restarts so far: "
                + restarts_phrase(simctl.imex_restarts(baseline, await read_counts(running)))
            )
            failover = await lose_the_rack(
                running,
                monitor,
                feed,
                TARGET,
                baseline=baseline,
                screen=screen,
                tracer=tracer,
                step_s=step_s,
            )
            with tracer.start_as_current_span("delete the seed"):
                await _delete_seed(running, monitor, screen=screen, step_s=step_s)
        spanning = await span_both_racks(
            running, client, feed, tally, screen=screen, tracer=tracer, step_s=step_s
        )
    restarts = simctl.imex_restarts(baseline, await read_counts(running))
    return replace(
        seed,
        failover=failover,
        spanning=spanning,
        events=tally.counts.copy(),
        imex_restarts=restarts,
    )


async def _delete_seed(
    running: Running, monitor: Monitor, *, screen: Screen, step_s: float
) -> None:
    """Delete the seed's workload, then its domain; wait until its pods (terminating ones too),
    its Placement and the domain are gone: the allocator has released its nodes and channel."""
    screen.step("delete the seed's workload and domain; wait until their GPUs are free")
    deleted = time.monotonic()
    for line in await kubectl.delete(running.kubeconfig, MANIFESTS[::-1]):
        screen.live(line)
    await monitor.until(
        lambda v: v.gone(),
        what=f"the pods, Placement and domain of {TARGET.domain} gone",
        timeout_s=step_s,
        logs=[running.log("domain-controller"), running.log("clique-allocator")],
    )
    screen.note(
        f"{TARGET.domain} gone {time.monotonic() - deleted:.1f} s after kubectl delete: its "
        f"{TARGET.replicas} pods, its Placement and the domain; their GPUs and channel are free"
    )


async def _seed_act(
    running: Running,
    monitor: Monitor,
    feed: EventFeed,
    *,
    screen: Screen,
    tracer: Tracer,
    step_s: float,
) -> Summary:
    """Apply the seed, wait for Ready, the fatal XID and the recovery; the act's figures."""
    placing = [running.log("clique-allocator"), running.log("domain-controller")]
    healing = [running.log("nodehost"), running.log("domain-controller")]
    with tracer.start_as_current_span("apply and wait for Ready") as applying:
        screen.step("apply the two example manifests with kubectl")
        joined = kubectl.trace_annotations(tracer, applying)
        applied = time.monotonic()
        for line in await apply_manifests(running.kubeconfig, joined):
            screen.live(line)
        ready = await monitor.until(
            lambda v: v if v.ready_with(TARGET.replicas) else None,
            what=f"domain {TARGET.domain} Ready with {TARGET.replicas} pods running",
            timeout_s=step_s,
            logs=placing,
        )
        time_to_ready = time.monotonic() - applied
    domain = ready.domain
    assert domain is not None  # ready_with holds only with a domain
    screen.note(
        f"Ready {time_to_ready:.1f} s after kubectl apply: {ready.pods.running} pods on "
        f"{len(domain.members)} nodes of clique {domain.clique}, IMEX channel {domain.channel}"
    )

    victim = pick_member(domain.members)
    evicted = sorted(pod for pod, node in ready.pod_nodes.items() if node == victim)
    with tracer.start_as_current_span("fatal XID"):
        screen.step(f"inject XID {XID} (an NVLink error) on member node {victim}")
        faulted = time.monotonic()
        monitor.watch_imex()
        await _fault(running, victim, {"kind": "xid", "gpu": 0, "xid": XID}, screen)
        effect = await monitor.until(
            lambda v: v.tainted.get(victim),
            what=f"the health monitor tainting {victim}",
            timeout_s=step_s,
            logs=healing,
        )
        screen.note(f"health monitor tainted {victim}: cdo.dev/gpu-fault ({effect})")
        await monitor.until(
            lambda v: not set(evicted) & set(v.pod_nodes),
            what=f"the eviction of {', '.join(evicted)}",
            timeout_s=step_s,
            logs=[running.log("sim")],
        )
        screen.note(f"evicted {', '.join(evicted) or 'no pod'} from {victim}")
        degraded = await monitor.until(
            _degraded, what="the domain Degraded", timeout_s=step_s, logs=healing
        )
        fault_to_degraded = time.monotonic() - faulted
        screen.note(
            f"domain Degraded ({degraded.reason}) {fault_to_degraded:.1f} s after the fault"
        )
        waiting = await monitor.until(
            _replacement,
            what="the replacement pod",
            timeout_s=step_s,
            logs=placing,
        )
        screen.note(
            f"the replacement pod waits, gated: {waiting} (its clique has no other free node)"
            if waiting != "placed"
            else "the replacement pod was placed at once"
        )

    with tracer.start_as_current_span("GPU reset and recovery"):
        screen.step(f"GPU reset on {victim}: clear the fault and wait for the recovery")
        await _fault(running, victim, None, screen)
        # Whole again: Ready, no taint left, and no slice the allocator still finds stuck.
        recovered = await monitor.until(
            lambda v: (
                v
                if v.ready_with(TARGET.replicas) and not v.tainted and stuck_slice(v) is None
                else None
            ),
            what=f"domain {TARGET.domain} Ready again",
            timeout_s=step_s,
            logs=healing + placing,
        )
        fault_to_ready = time.monotonic() - faulted
        imex_low = monitor.imex_low
    replacements = sorted(set(recovered.pod_nodes) - set(ready.pod_nodes))
    node = recovered.pod_nodes[replacements[0]] if replacements else None
    same_clique = node is not None and recovered.cliques.get(node) == domain.clique
    screen.note(
        f"Ready again {fault_to_ready:.1f} s after the fault: replacement "
        f"{', '.join(replacements) or '-'} running on {node or '-'}"
        + (f", in clique {domain.clique}" if same_clique else ", OUTSIDE the domain's clique")
    )
    if imex_low is not None:
        screen.note(
            f"IMEX ready through the fault and the reset: {imex_low}/{recovered.nodes} nodes at "
            "the lowest (an XID changes no IMEX node map)"
        )
    if not same_clique:
        raise StoryError("the replacement pod did not land in the domain's clique", logs=placing)
    domain_now = recovered.domain or domain
    # The membership event of the last change was published just before the API showed
    # it: wait a moment for it, so that the summary counts it.
    await feed.wait(lambda t: t.phase == "Ready", timeout_s=5)
    return Summary(
        time_to_ready_s=time_to_ready,
        clique=domain.clique,
        channel=domain.channel,
        members=len(domain.members),
        faulted_node=victim,
        degraded_reason=degraded.reason,
        fault_to_degraded_s=fault_to_degraded,
        fault_to_ready_s=fault_to_ready,
        replacement_node=node,
        recovered=True,
        nodes=recovered.nodes,
        imex_low=imex_low,
        domain_trace_id=trace_id_of(domain_now.trace_context),
    )
