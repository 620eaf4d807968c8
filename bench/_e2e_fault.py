"""Fault to recovered: an XID 79 on a member node until the domain is whole and Ready again.

"Recovered" is read from the API, not from events: the domain reports Ready, the faulted node is
no longer among its members, every member sits in the domain's clique, and the workload's pods
all run, none of them on a faulted node. The evicted pod's replacement is the pod that was not
there before the fault.

After each run (untimed) the bench resets the GPU (:func:`heal`: the fault cleared, which
restarts the node's device plugin so that it lists the GPU healthy again) and waits until the
node has no fault taint, so that every run starts on a healthy cluster and the health
monitors' circuit breaker, which caps the nodes holding NoExecute at once, never holds a later
run's fault back. The IMEX daemon restarts of the whole scenario, counted by the node host, are
split into those on faulted nodes and those elsewhere (:func:`split_restarts`; elsewhere must
be 0: an XID changes no IMEX node map).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench._e2e_probe import Look, look, look_nodes, poll
from bench._e2e_workloads import Scenario
from shared.kube.client import KubeClient
from sim import control as simctl

FATAL_XID = 79
"""The GPU has fallen off the bus: fatal and about that GPU alone, so the health monitor evicts
the pod holding it (the node's device plugin takes the GPU out of allocatable) and leaves the
node untainted. The scenario's pods take whole nodes, so the pod leaves the node either way."""


@dataclass(frozen=True)
class Recovery:
    node: str
    """The node the fault was injected on."""
    replacement_node: str
    degraded_s: float
    """Injection until the domain first stopped reporting Ready (or lost the node)."""
    recovered_s: float
    """Injection until the domain was whole and Ready again."""


def _domain_members(seen: Look, scenario: Scenario) -> tuple[str | None, set[str], set[str]]:
    """The domain's clique, its member nodes, and the cliques those members report."""
    domain = seen.domains.get(scenario.domains[0])
    if domain is None:
        return None, set(), set()
    members = {node.name for node in domain.status.nodes}
    return domain.status.clique, members, {node.clique_id for node in domain.status.nodes}


def pick_member(seen: Look, faulted: set[str]) -> str:
    """A node running one of the domain's pods that has not been faulted yet (lowest name)."""
    candidates = sorted({pod.spec.node_name for pod in seen.running()} - faulted)
    if not candidates:
        raise RuntimeError("every member node has been faulted already")
    return candidates[0]


def recovered(seen: Look, scenario: Scenario, faulted: set[str], clique: str) -> bool:
    domain = seen.domains.get(scenario.domains[0])
    if domain is None or domain.status.status != "Ready":
        return False
    own_clique, members, member_cliques = _domain_members(seen, scenario)
    running = seen.running()
    return (
        own_clique == clique
        and not members & faulted
        and member_cliques == {clique}
        and len(seen.pods) == scenario.pods
        and len(running) == scenario.pods
        and not {pod.spec.node_name for pod in running} & faulted
    )


async def inject_and_recover(
    client: KubeClient,
    scenario: Scenario,
    *,
    state_dir: Path,
    faulted: set[str],
    timeout_s: float,
) -> Recovery:
    """Fault one member of the (running, Ready) domain; time until it is recovered."""
    before = await look(client, scenario.namespace)
    clique, _, _ = _domain_members(before, scenario)
    if clique is None:
        raise RuntimeError(f"{scenario.domains[0]} has no clique yet")
    node = pick_member(before, faulted)
    pods_before = {pod.metadata.name for pod in before.pods}
    body = simctl.fault_body(
        xid=FATAL_XID,
        gpu=0,
        gpu_lost=False,
        gpu_back=False,
        nvlink_down=None,
        nvlink_up=None,
        fabric_state=None,
        fabric_problems=(),
        clear=False,
    )
    faulted.add(node)
    started = time.perf_counter()
    # The control API is plain blocking HTTP; keep the event loop free while it answers.
    await asyncio.to_thread(simctl.fault, state_dir, node, body, say=lambda _line: None)

    degraded_at: float | None = None
    last: Look = before

    async def probe() -> Look | None:
        nonlocal degraded_at, last
        last = await look(client, scenario.namespace)
        if degraded_at is None:
            domain = last.domains.get(scenario.domains[0])
            _, members, _ = _domain_members(last, scenario)
            if domain is None or domain.status.status != "Ready" or node not in members:
                degraded_at = time.perf_counter() - started
        # Only this run's node: an earlier run's node was healed (:func:`heal`) and may take
        # the replacement now.
        return last if recovered(last, scenario, {node}, clique) else None

    after, _ = await poll(
        probe,
        timeout_s=timeout_s,
        what=lambda: f"fault on {node}: {last.summary(scenario)}",
    )
    recovered_s = time.perf_counter() - started
    replacements = [pod for pod in after.running() if pod.metadata.name not in pods_before]
    return Recovery(
        node=node,
        replacement_node=",".join(sorted(pod.spec.node_name for pod in replacements)) or "-",
        degraded_s=degraded_at if degraded_at is not None else recovered_s,
        recovered_s=recovered_s,
    )


async def heal(client: KubeClient, *, state_dir: Path, node: str, timeout_s: float) -> float:
    """The GPU reset: clear ``node``'s faults and wait until its fault taint is gone; seconds."""
    await asyncio.to_thread(simctl.fault, state_dir, node, None, say=lambda _line: None)

    async def probe() -> bool:
        entry = (await look_nodes(client)).get(node)
        return entry is not None and not entry.tainted

    _, seconds = await poll(
        probe, timeout_s=timeout_s, what=lambda: f"{node} still tainted after the GPU reset"
    )
    return seconds


def split_restarts(restarts: Mapping[str, int], faulted: Collection[str]) -> tuple[int, int]:
    """IMEX daemon restarts outside the faulted nodes, and on them (pure)."""
    outside = sum(count for node, count in restarts.items() if node not in faulted)
    return outside, sum(count for node, count in restarts.items() if node in faulted)
