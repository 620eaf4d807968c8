"""Failover: a whole clique's fabric lost until the domain is Ready in another clique.

The failover domain (``spec.failover.graceSeconds``, :data:`bench._e2e_workloads.FAILOVER_GRACE_S`)
runs in one clique. The bench makes fabric registration fail on every GPU of every node of that
clique (``{"kind": "fabric", "gpu": null, "state": "not_started"}`` through the node host, a
fabric manager gone; a NoSchedule warning, so the health monitors' circuit breaker does not cap
it), and times from the first injection until :func:`failed_over` holds: the domain Ready in
another clique with every pod running on its members there. The figure the bench reports is
that time less the grace, which the allocator waits on purpose: what cdo adds to the user's
grace (the health monitors noticing, the move, the evictions, the replacements' placement,
scheduling and IMEX channel). Then, untimed: the Placement must say the slice moved from the
lost clique (:func:`check_moved`), the fabric comes back (the faults cleared) and the bench
waits until the clique's nodes are labelled and IMEX-ready again, so that the next run or
scenario finds the cluster whole. Each run moves the domain on from the clique it is in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._e2e_probe import Look, NodeLook, look, look_nodes, placement_of, poll
from bench._e2e_workloads import Scenario
from shared.errors import CdoError
from shared.kube.client import KubeClient
from sim import control as simctl

FABRIC_LOST: dict[str, object] = {"kind": "fabric", "gpu": None, "state": "not_started"}


class FailoverMismatchError(CdoError):
    """The domain became Ready elsewhere, but its Placement does not record the move."""


@dataclass(frozen=True)
class Failover:
    lost_clique: str
    new_clique: str
    nodes: int
    """Nodes whose fabric was lost (the whole clique)."""
    ready_s: float
    """From the first fabric fault until the domain was Ready in another clique."""
    grace_s: float
    restored_s: float = 0.0
    """From clearing the faults until the clique's nodes were labelled and IMEX-ready again."""

    @property
    def failover_s(self) -> float:
        """What cdo took beyond the grace the user asked for."""
        return self.ready_s - self.grace_s


def clique_of(seen: Look, scenario: Scenario) -> str:
    """The clique of the scenario's (one-clique) domain, "" while it has none."""
    domain = seen.domains.get(scenario.domains[0])
    return (domain.status.clique or "") if domain is not None else ""


def failed_over(seen: Look, scenario: Scenario, lost: str) -> str | None:
    """The domain's new clique once it is Ready in a clique other than ``lost``, every member in
    that clique and every pod of the scenario running on a member; else None."""
    domain = seen.domains.get(scenario.domains[0])
    if domain is None or domain.status.status != "Ready":
        return None
    clique = domain.status.clique or ""
    members = {node.name for node in domain.status.nodes}
    running = seen.running()
    if not clique or clique == lost:
        return None
    if {node.clique_id for node in domain.status.nodes} != {clique}:
        return None
    if len(seen.pods) != scenario.pods or len(running) != scenario.pods:
        return None
    if not {pod.spec.node_name for pod in running} <= members:
        return None
    return clique


def clique_whole(nodes: Mapping[str, NodeLook], names: Sequence[str], clique: str) -> bool:
    """Every one of ``names`` is labelled with ``clique`` again and IMEX-ready."""
    return all(
        (entry := nodes.get(name)) is not None and entry.clique == clique and entry.imex_ready
        for name in names
    )


async def check_moved(client: KubeClient, scenario: Scenario, *, lost: str, new: str) -> None:
    """FailoverMismatchError unless the domain's Placement records its slice moved from ``lost``
    to ``new``."""
    spec = await placement_of(client, scenario.namespace, scenario.domains[0])
    pieces = spec.all_slices if spec is not None else ()
    if not any(piece.moved_from == lost and piece.clique == new for piece in pieces):
        found = ", ".join(f"{p.index}: {p.clique} from {p.moved_from or '-'}" for p in pieces)
        raise FailoverMismatchError(
            f"{scenario.key}: {scenario.domains[0]} is Ready in {new}, but its Placement does "
            f"not say it moved there from {lost}: slices {found or 'none'}"
        )


async def set_fabric(state_dir: Path, nodes: Sequence[str], *, lost: bool) -> None:
    """Fabric lost on every GPU of ``nodes``, or (not ``lost``) every fault of theirs cleared."""
    body = FABRIC_LOST if lost else None

    def inject() -> None:
        for node in nodes:
            simctl.fault(state_dir, node, body, say=lambda _line: None)

    # The control API is plain blocking HTTP; keep the event loop free while it answers.
    await asyncio.to_thread(inject)


async def lose_clique(
    client: KubeClient,
    scenario: Scenario,
    *,
    state_dir: Path,
    grace_s: float,
    timeout_s: float,
) -> Failover:
    """Take the fabric of the (Ready) domain's whole clique away; time until it is Ready in
    another; then bring the fabric back and wait until that clique is whole again."""
    before = await look(client, scenario.namespace)
    lost = clique_of(before, scenario)
    if not lost:
        raise RuntimeError(f"{scenario.domains[0]} is in no single clique")
    nodes = sorted(name for name, node in (await look_nodes(client)).items() if node.clique == lost)
    started = time.perf_counter()
    await set_fabric(state_dir, nodes, lost=True)
    last: Look = before

    async def probe() -> str | None:
        nonlocal last
        last = await look(client, scenario.namespace)
        return failed_over(last, scenario, lost)

    try:
        new, _ = await poll(
            probe,
            timeout_s=timeout_s + grace_s,
            what=lambda: f"fabric of clique {lost} lost: {last.summary(scenario)}",
        )
    except TimeoutError:
        # Leave the cluster whole for what follows, then report the timeout.
        await restore(client, state_dir=state_dir, nodes=nodes, clique=lost, timeout_s=timeout_s)
        raise
    ready_s = time.perf_counter() - started
    await check_moved(client, scenario, lost=lost, new=new)
    restored_s = await restore(
        client, state_dir=state_dir, nodes=nodes, clique=lost, timeout_s=timeout_s
    )
    return Failover(
        lost_clique=lost,
        new_clique=new,
        nodes=len(nodes),
        ready_s=ready_s,
        grace_s=grace_s,
        restored_s=restored_s,
    )


async def restore(
    client: KubeClient, *, state_dir: Path, nodes: Sequence[str], clique: str, timeout_s: float
) -> float:
    """The fabric back on ``nodes``; seconds until they are in ``clique`` and IMEX-ready."""
    started = time.perf_counter()
    await set_fabric(state_dir, nodes, lost=False)

    async def probe() -> bool:
        return clique_whole(await look_nodes(client), nodes, clique)

    await poll(
        probe,
        timeout_s=timeout_s,
        what=lambda: f"the {len(nodes)} nodes of clique {clique} labelled and IMEX-ready again",
    )
    return time.perf_counter() - started
