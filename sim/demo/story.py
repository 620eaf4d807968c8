"""The story on a running system: apply the example manifests and wait for the domain to be
Ready; inject a fatal XID on one member node and follow the eviction, the degraded domain, the
GPU reset and the recovery. Returns what it measured."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from opentelemetry.trace import Tracer

from shared.cli import simctl
from shared.cli.errors import CliError
from shared.crds.names import TRACE_CONTEXT_ANNOTATION
from shared.kube.client import KubeClient
from shared.tracing import annotations_for, exports
from sim.demo.bringup import Running
from sim.demo.eventfeed import EventFeed
from sim.demo.monitor import Monitor, StoryError
from sim.demo.observe import ClusterView, DomainView, Target
from sim.demo.progress import trace_id_of
from sim.demo.screen import Screen
from sim.demo.summary import Summary
from sim.demo.tally import Tally

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
MANIFESTS = (EXAMPLES / "training-domain-1.yaml", EXAMPLES / "llm-training.yaml")
TARGET = Target(
    namespace="default", domain="training-domain-1", selector="app=llm-training", replicas=18
)
"""What :data:`MANIFESTS` create (kept in step with them by the demo's test)."""

XID = 79
"""GPU has fallen off the bus: fatal, the node is drained (NoExecute taint)."""


@dataclass(frozen=True)
class Timeouts:
    step_s: float = 120.0


def pick_member(members: Sequence[str]) -> str:
    """The member node the fault hits: the middle one in slot order, nothing special about it."""
    if not members:
        raise StoryError("the Ready domain lists no member nodes")
    return members[len(members) // 2]


def kubectl_binary() -> str:
    return str(Path(sys.executable).parent / "kubectl")


async def kubectl(kubeconfig: str, *args: str, stdin: bytes | None = None) -> list[str]:
    process = await asyncio.create_subprocess_exec(
        kubectl_binary(), "--kubeconfig", kubeconfig, *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate(stdin)
    lines = out.decode(errors="replace").splitlines()
    if process.returncode != 0:
        raise StoryError(f"kubectl {' '.join(args)} failed:\n" + "\n".join(lines))
    return lines


async def apply_manifests(kubeconfig: str, annotations: dict[str, str]) -> list[str]:
    """``kubectl apply`` of the example manifests, the files as they are.

    With ``annotations`` (the demo's trace context, when traces are exported) the ComputeDomain
    is annotated on its way in, by ``kubectl annotate --local``, so the domain's story joins
    the demo's trace from its first reconcile; the files on disk stay unchanged.
    """
    if not annotations:
        return await kubectl(kubeconfig, "apply", *(a for m in MANIFESTS for a in ("-f", str(m))))
    domain, *rest = MANIFESTS
    pairs = [f"{key}={value}" for key, value in annotations.items()]
    annotated = await kubectl(
        kubeconfig, "annotate", "--local", "-f", str(domain), *pairs, "-o", "yaml"
    )
    lines = await kubectl(kubeconfig, "apply", "-f", "-", stdin="\n".join(annotated).encode())
    return lines + await kubectl(kubeconfig, "apply", *(a for m in rest for a in ("-f", str(m))))


async def _fault(
    running: Running, node: str, body: dict[str, object] | None, screen: Screen
) -> None:
    try:
        await asyncio.to_thread(simctl.fault, running.state_dir, node, body, say=screen.live)
    except CliError as exc:
        raise StoryError(
            f"the node host refused the fault: {exc}", logs=[running.log("nodehost")]
        ) from exc


@contextlib.asynccontextmanager
async def _watching(
    running: Running, screen: Screen, tally: Tally
) -> AsyncIterator[tuple[Monitor, EventFeed]]:
    client = await KubeClient.connect(kubeconfig=running.kubeconfig, request_timeout_s=10)
    try:
        async with EventFeed(
            running.nats_url, tally=tally, show=screen.live, since=datetime.now(UTC)
        ) as feed:
            monitor = Monitor(client, TARGET, screen)
            task = asyncio.create_task(monitor.run(), name="demo-monitor")
            try:
                yield monitor, feed
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
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
    placing = [running.log("clique-allocator"), running.log("domain-controller")]
    healing = [running.log("nodehost"), running.log("domain-controller")]
    async with _watching(running, screen, tally) as (monitor, feed):
        with tracer.start_as_current_span("apply and wait for Ready") as applying:
            screen.step("apply the two example manifests with kubectl")
            joined = (
                annotations_for(applying, key=TRACE_CONTEXT_ANNOTATION) if exports(tracer) else {}
            )
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
            screen.step(f"inject XID {XID} (GPU fallen off the bus) on member node {victim}")
            faulted = time.monotonic()
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
            recovered = await monitor.until(
                lambda v: v if v.ready_with(TARGET.replicas) and not v.tainted else None,
                what=f"domain {TARGET.domain} Ready again",
                timeout_s=step_s,
                logs=healing + placing,
            )
            fault_to_ready = time.monotonic() - faulted
        replacements = sorted(set(recovered.pod_nodes) - set(ready.pod_nodes))
        node = recovered.pod_nodes[replacements[0]] if replacements else None
        same_clique = node is not None and recovered.cliques.get(node) == domain.clique
        screen.note(
            f"Ready again {fault_to_ready:.1f} s after the fault: replacement "
            f"{', '.join(replacements) or '-'} running on {node or '-'}"
            + (f", in clique {domain.clique}" if same_clique else ", OUTSIDE the domain's clique")
        )
        if not same_clique:
            raise StoryError(
                "the replacement pod did not land in the domain's clique", logs=placing
            )
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
        events=tally.counts.copy(),
        domain_trace_id=trace_id_of(domain_now.trace_context),
    )
