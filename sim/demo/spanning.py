"""The multi-clique act: one ComputeDomain larger than a clique, over both racks.

Once the seed is gone (:mod:`sim.demo.story`), the demo applies ``training-domain-2.yaml`` and
``llm-training-2.yaml`` (an Indexed Job of 36 pods of 4 GPUs, ``spec.gang.sliceSize: 18``) with
kubectl, follows the pods and the domain until it is Ready with every pod running, checks the
Placement's slices (:func:`slice_problems`, pure) and shows them: per slice its clique, IMEX
channel, rank range and member nodes. Returns the act's :class:`~sim.demo.summary.SpanFigures`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence

from opentelemetry.trace import Tracer

from shared.kube.client import KubeClient
from sim.demo import kubectl
from sim.demo.bringup import Running
from sim.demo.eventfeed import EventFeed
from sim.demo.monitor import StoryError, following
from sim.demo.observe import ClusterView, SliceView, Target
from sim.demo.progress import slice_phrase
from sim.demo.screen import Screen
from sim.demo.summary import SpanFigures
from sim.demo.tally import Tally

SPAN_MANIFESTS = (
    kubectl.EXAMPLES / "training-domain-2.yaml",
    kubectl.EXAMPLES / "llm-training-2.yaml",
)
SPAN_TARGET = Target(
    namespace="default", domain="training-domain-2", selector="app=llm-training-2", replicas=36
)
"""What :data:`SPAN_MANIFESTS` create (kept in step with them by the demo's test)."""


def slice_problems(
    slices: Sequence[SliceView], cliques: Mapping[str, str], *, pods: int
) -> list[str]:
    """What is wrong with a multi-clique domain's slices; empty when nothing is.

    The slices must cover ranks ``0 .. pods - 1`` one after the other, each with a pod pinned
    for every rank, every member node in the slice's clique (``cliques``: each node's clique
    label), one channel per clique, and more than one clique in all.
    """
    if not slices:
        return ["the Placement has no slices"]
    problems: list[str] = []
    next_rank = 0
    channels: dict[str, set[int]] = defaultdict(set)
    for piece in slices:
        name = f"slice {piece.index}"
        if piece.first_rank != next_rank:
            problems.append(f"{name} starts at rank {piece.first_rank}, not {next_rank}")
        next_rank = piece.first_rank + piece.size
        if piece.pods != piece.size:
            problems.append(f"{name} has {piece.pods} pods pinned for {piece.size} ranks")
        outside = [node for node in piece.nodes if cliques.get(node) != piece.clique]
        if outside:
            problems.append(f"{name} has nodes outside clique {piece.clique}: {', '.join(outside)}")
        channels[piece.clique].add(piece.channel)
    if next_rank != pods:
        problems.append(f"the slices cover {next_rank} ranks, not {pods}")
    problems += [
        f"clique {clique} has several channels: {sorted(found)}"
        for clique, found in channels.items()
        if len(found) > 1
    ]
    if len(channels) < 2:
        problems.append("the domain is in one clique only")
    return problems


def _ready_and_sliced(view: ClusterView) -> ClusterView | None:
    """The domain Ready, every pod running, and every pod seated in a slice."""
    replicas = SPAN_TARGET.replicas
    seated = sum(piece.pods for piece in view.slices)
    return view if view.ready_with(replicas) and seated == replicas else None


async def span_both_racks(
    running: Running,
    client: KubeClient,
    feed: EventFeed,
    tally: Tally,
    *,
    screen: Screen,
    tracer: Tracer,
    step_s: float,
) -> SpanFigures:
    placing = [running.log("clique-allocator"), running.log("domain-controller")]
    tally.follow(namespace=SPAN_TARGET.namespace, domain=SPAN_TARGET.domain)
    async with following(client, SPAN_TARGET, screen) as monitor:
        with tracer.start_as_current_span("one domain over both racks") as applying:
            screen.step(
                "one domain over both racks: apply "
                + " and ".join(manifest.name for manifest in SPAN_MANIFESTS)
                + " with kubectl"
            )
            joined = kubectl.trace_annotations(tracer, applying)
            applied = time.monotonic()
            for line in await kubectl.apply(running.kubeconfig, SPAN_MANIFESTS, joined):
                screen.live(line)
            ready = await monitor.until(
                _ready_and_sliced,
                what=(
                    f"domain {SPAN_TARGET.domain} Ready with {SPAN_TARGET.replicas} pods "
                    "running in its slices"
                ),
                timeout_s=step_s,
                logs=placing,
            )
            time_to_ready = time.monotonic() - applied
    problems = slice_problems(ready.slices, ready.cliques, pods=SPAN_TARGET.replicas)
    if problems:
        raise StoryError(
            f"the slices of {SPAN_TARGET.domain} are wrong: " + "; ".join(problems), logs=placing
        )
    cliques = len({piece.clique for piece in ready.slices})
    screen.note(
        f"Ready {time_to_ready:.1f} s after kubectl apply: {ready.pods.running} pods in "
        f"{len(ready.slices)} slices over {cliques} cliques"
    )
    for piece in ready.slices:
        screen.note(f"slice {piece.index}: {slice_phrase(piece)}")
    # As in the seed act: let the Ready membership event arrive, so that the summary counts it.
    await feed.wait(lambda t: t.phase == "Ready", timeout_s=5)
    return SpanFigures(
        domain=SPAN_TARGET.domain,
        time_to_ready_s=time_to_ready,
        pods=ready.pods.running,
        slices=ready.slices,
    )
