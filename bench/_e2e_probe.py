"""What the end-to-end benchmark reads from the API while it waits: one list per kind per look.

Everything here is a read of current state (level, not events), so a look taken at any moment
says whether a scenario is done, gone, or recovered from a fault; :func:`look_nodes` says each
node's clique label, fault taint and IMEX readiness. Once a scenario whose domain is larger than
a clique is done, :func:`check_slices` reads its Placement and fails the run when the slices are
not the ones the scenario expects (:func:`slice_problems`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from bench._e2e_workloads import JOB_COMPLETION_INDEX, Scenario
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain, Placement, PlacementSpec
from shared.crds.names import CLIQUE_LABEL, GPU_FAULT_TAINT, IMEX_READY_CONDITION
from shared.errors import CdoError
from shared.kube.client import KubeClient
from shared.kube.models import Node, Pod
from shared.kube.resources import NODES, PODS

T = TypeVar("T")

POLL_INTERVAL_S = 0.05
"""~20 looks a second: fine enough for figures of a few seconds, light on a 2-core machine."""


class _Domains(msgspec.Struct):
    items: list[ComputeDomain]


class _Pods(msgspec.Struct):
    items: list[Pod]


class _Metadata(msgspec.Struct):
    name: str


class _Named(msgspec.Struct):
    metadata: _Metadata


class _NamedList(msgspec.Struct):
    items: list[_Named]


@dataclass(frozen=True)
class Look:
    """One look at a scenario's namespace."""

    domains: dict[str, ComputeDomain]
    pods: list[Pod]
    """Pods not being deleted."""
    terminating: int

    def ready_domains(self, names: tuple[str, ...]) -> int:
        return sum(
            1
            for name in names
            if (d := self.domains.get(name)) is not None and d.status.status == "Ready"
        )

    def running(self) -> list[Pod]:
        return [pod for pod in self.pods if pod.status.phase == "Running"]

    def summary(self, scenario: Scenario) -> str:
        return (
            f"{self.ready_domains(scenario.domains)}/{len(scenario.domains)} domains Ready, "
            f"{len(self.running())}/{scenario.pods} pods Running "
            f"({len(self.pods)} pods, {self.terminating} terminating)"
        )


async def look(client: KubeClient, namespace: str) -> Look:
    domains, pods = await asyncio.gather(
        client.list(COMPUTE_DOMAINS, namespace=namespace), client.list(PODS, namespace=namespace)
    )
    decoded = msgspec.json.decode(pods, type=_Pods).items
    live = [pod for pod in decoded if pod.metadata.deletion_timestamp is None]
    return Look(
        domains={d.metadata.name: d for d in msgspec.json.decode(domains, type=_Domains).items},
        pods=live,
        terminating=len(decoded) - len(live),
    )


def done(scenario: Scenario, seen: Look) -> bool:
    """Every domain Ready and exactly the scenario's pods Running."""
    return (
        seen.ready_domains(scenario.domains) == len(scenario.domains)
        and len(seen.pods) == scenario.pods
        and len(seen.running()) == scenario.pods
    )


class SliceMismatchError(CdoError):
    """A done scenario's Placement does not have the slices the scenario expects."""


def slice_problems(scenario: Scenario, spec: PlacementSpec, pods: list[Pod]) -> list[str]:
    """What is wrong with the domain's slices (nothing: ``[]``), given its running ``pods``.

    The slices must have the scenario's sizes in index order, follow each other from rank 0, each
    in a clique of its own, and seat every running pod exactly once; a pod that carries a Job
    completion index must sit at that rank.
    """
    pieces = sorted(spec.all_slices, key=lambda piece: piece.index)
    problems: list[str] = []
    sizes = tuple(piece.size for piece in pieces)
    if sizes != scenario.slice_sizes:
        problems.append(f"slice sizes {list(sizes)}, expected {list(scenario.slice_sizes)}")
    cliques = [piece.clique for piece in pieces]
    if len(set(cliques)) != len(cliques):
        problems.append(f"slices share cliques: {cliques}")
    first_rank = 0
    for piece in pieces:
        if piece.first_rank != first_rank:
            problems.append(
                f"slice {piece.index} starts at rank {piece.first_rank}, expected {first_rank}"
            )
        first_rank = piece.first_rank + piece.size
        if piece.placed_pods != piece.size:
            problems.append(f"slice {piece.index} seats {piece.placed_pods} of {piece.size} pods")
    seats = {
        placed.name: (piece, placed.rank, member.node)
        for piece in pieces
        for member in piece.members
        for placed in member.pods
    }
    for pod in pods:
        seat = seats.get(pod.metadata.name)
        if seat is None:
            problems.append(f"pod {pod.metadata.name} is seated in no slice")
            continue
        piece, rank, node = seat
        if node != pod.spec.node_name:
            problems.append(
                f"pod {pod.metadata.name} runs on {pod.spec.node_name}, seated on {node}"
            )
        index = pod.metadata.labels.get(JOB_COMPLETION_INDEX)
        if index is not None and int(index) != rank:
            problems.append(
                f"pod {pod.metadata.name} (index {index}) sits at rank {rank} in slice "
                f"{piece.index}"
            )
    return problems


_placement_decoder = msgspec.json.Decoder(Placement)


async def check_slices(client: KubeClient, scenario: Scenario, seen: Look) -> None:
    """Raise SliceMismatchError unless the scenario's domain has the slices it expects (a
    scenario without ``slice_sizes`` is not checked)."""
    if not scenario.slice_sizes:
        return
    (domain,) = scenario.domains
    raw = await client.get_or_none(PLACEMENTS, domain, namespace=scenario.namespace)
    if raw is None:
        raise SliceMismatchError(f"{scenario.key}: {scenario.namespace}/{domain} has no Placement")
    spec = _placement_decoder.decode(raw).spec
    problems = slice_problems(scenario, spec, seen.running())
    if problems:
        found = ", ".join(
            f"{piece.index}: {piece.size} pods in {piece.clique}" for piece in spec.all_slices
        )
        raise SliceMismatchError(
            f"{scenario.key}: the Placement of {scenario.namespace}/{domain} is not what the "
            f"scenario expects: {'; '.join(problems[:10])}"
            f"{f' (and {len(problems) - 10} more)' if len(problems) > 10 else ''}; "
            f"slices: {found or 'none'}"
        )


class _Nodes(msgspec.Struct):
    items: list[Node]


@dataclass(frozen=True)
class NodeLook:
    """One node as the benchmark needs it."""

    clique: str
    """Its clique label ("" without one: fabric lost, or not yet registered)."""
    tainted: bool
    """It carries the ``cdo.dev/gpu-fault`` taint (any effect)."""
    imex_ready: bool


def node_look(node: Node) -> NodeLook:
    ready = node.condition(IMEX_READY_CONDITION)
    return NodeLook(
        clique=node.metadata.labels.get(CLIQUE_LABEL, ""),
        tainted=any(taint.key == GPU_FAULT_TAINT for taint in node.spec.taints),
        imex_ready=ready is not None and ready.status == "True",
    )


async def look_nodes(client: KubeClient) -> dict[str, NodeLook]:
    """Every node, by name."""
    items = msgspec.json.decode(await client.list(NODES), type=_Nodes).items
    return {node.metadata.name: node_look(node) for node in items}


async def placement_of(client: KubeClient, namespace: str, name: str) -> PlacementSpec | None:
    raw = await client.get_or_none(PLACEMENTS, name, namespace=namespace)
    return None if raw is None else _placement_decoder.decode(raw).spec


async def placements_in(client: KubeClient, namespace: str) -> list[str]:
    raw = await client.list(PLACEMENTS, namespace=namespace)
    return [item.metadata.name for item in msgspec.json.decode(raw, type=_NamedList).items]


async def poll(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout_s: float,
    what: Callable[[], str],
    interval_s: float = POLL_INTERVAL_S,
) -> tuple[T, float]:
    """Look until ``probe`` answers; the answer and the seconds it took. TimeoutError names
    ``what()``, the last state seen, so a stuck run says where it stuck."""
    started = time.perf_counter()
    while True:
        answer = await probe()
        elapsed = time.perf_counter() - started
        if answer:
            return answer, elapsed
        if elapsed >= timeout_s:
            raise TimeoutError(f"not done after {timeout_s:.0f} s: {what()}")
        await asyncio.sleep(interval_s)
