"""The placement bench's trace with constraint-bearing pods (``python -m bench.placement``).

Every GPU node is tainted ``nvidia.com/gpu=present:NoSchedule``; in every rack, trays 12-17
are another team's: tainted ``dedicated=inference:NoSchedule``, labelled
``example.com/pool=inference`` and given 256Gi of memory (trays 0-11: ``pool=training``,
960Gi). Each gang's pods tolerate the GPU taint and carry one of three constraints, a third of
the gangs each: nothing more; the node selector ``example.com/pool=training``; 230Gi of memory
per GPU. All three rule out the same trays (12-17), so the trace is replayed twice:

- constrained: ``ours`` on the whole cluster, each attempt computing the gang's node limits
  with the allocator's own ``eligibility.node_limits`` from its pod spec, the nodes and what
  pods already hold on them (the memory of the placed gangs), then placing with them;
- unconstrained on the same nodes: ``ours`` on racks of 12 trays without constraints.

Allocation is over the GPUs the constraints leave (trays 0-11); decision time includes the
limits.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import msgspec

from bench.placement import GPUS_PER_NODE, NOT_PLACED, Gang, Ours, Outcome
from services.clique_allocator.eligibility import (
    NO_USE,
    LimitsMemo,
    NodeUse,
    node_limits,
)
from services.clique_allocator.needs import GangNeeds, gang_needs, pod_requests_of
from services.clique_allocator.nodes import NodeFacts
from services.clique_allocator.placement import Clique, GangRequest, Placed, place
from shared.crds.names import HOSTNAME_LABEL
from shared.kube.models import Pod, Taint
from shared.scheduling.requests import allocatable_amounts

OPEN_TRAYS = 12
"""Trays 0-11 of each rack take the gangs; the rest are ruled out by every constraint."""
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
DEDICATED = Taint(key="dedicated", value="inference", effect="NoSchedule")
POOL = "example.com/pool"
CLASSES = ("toleration", "pool", "memory")


def node_facts(cliques: Sequence[Clique]) -> list[NodeFacts]:
    """The constrained cluster's nodes as the allocator's facts."""
    facts = []
    for clique in cliques:
        for node in clique.nodes:
            shared = node.slot >= OPEN_TRAYS
            allocatable = {"nvidia.com/gpu": str(node.gpus), "cpu": "144",
                           "memory": "256Gi" if shared else "960Gi", "pods": "110"}  # fmt: skip
            facts.append(
                NodeFacts(
                    name=node.name,
                    clique=clique.id,
                    gpus=node.gpus,
                    slot=node.slot,
                    labels={HOSTNAME_LABEL: node.name, POOL: "inference" if shared else "training"},
                    taints=(GPU_TAINT, DEDICATED) if shared else (GPU_TAINT,),
                    allocatable=allocatable_amounts(allocatable),
                )
            )
    return facts


def pod_of(kind: str, gpus_per_pod: int) -> Pod:
    """One pod of a gang of this constraint class."""
    resources: dict[str, object] = {"limits": {"nvidia.com/gpu": str(gpus_per_pod)}}
    if kind == "memory":
        resources["requests"] = {"memory": f"{230 * gpus_per_pod}Gi", "cpu": "8"}
    spec: dict[str, object] = {
        "containers": [{"name": "main", "resources": resources}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if kind == "pool":
        spec["nodeSelector"] = {POOL: "training"}
    return msgspec.convert(
        {"metadata": {"name": "p", "namespace": "bench"}, "spec": spec}, type=Pod
    )


class Constrained(Ours):
    """``ours`` with every gang's pods constrained (see the module docstring)."""

    name = "ours, constrained pods"

    def __init__(self, cliques: Sequence[Clique], rng: random.Random) -> None:
        super().__init__(cliques)
        self.facts = node_facts(cliques)
        self.rng = rng
        self.kinds: dict[str, str] = {}
        self.needs: dict[tuple[str, int], tuple[GangNeeds, dict[str, int]]] = {}
        self.memos: dict[tuple[str, int], LimitsMemo] = {}
        self.use: dict[str, NodeUse] = {}
        self.demand: dict[str, dict[str, int]] = {}

    def _needs(self, kind: str, gpus_per_pod: int) -> tuple[GangNeeds, dict[str, int]]:
        """The needs of a class and what one of its pods requests."""
        key = (kind, gpus_per_pod)
        if key not in self.needs:
            pod = pod_of(kind, gpus_per_pod)
            self.needs[key] = (gang_needs([pod], pin_label=HOSTNAME_LABEL), pod_requests_of(pod))
        return self.needs[key]

    def attempt(self, gang: Gang) -> Outcome:
        kind = self.kinds.setdefault(gang.key, self.rng.choice(CLASSES))
        needs, demand = self._needs(kind, gang.gpus_per_pod)
        memo = self.memos.setdefault((kind, gang.gpus_per_pod), LimitsMemo())
        limits = node_limits(
            needs,
            nodes=self.facts,
            others=self.use,
            gpus_per_pod=gang.gpus_per_pod,
            memo=memo,
        )
        request = GangRequest(
            domain=gang.key,
            new_pods=gang.pods,
            gpus_per_pod=gang.gpus_per_pod,
            limits=limits if limits.nodes else None,
        )
        decision = place(self.view, request)
        if not isinstance(decision, Placed):
            return NOT_PLACED
        self.view = self.view.with_domain(decision.domain, decision.reservations)
        self.demand[gang.key] = demand
        self._account(decision, demand, sign=1)
        return self._record(gang, decision)

    def _account(self, decision: Placed, demand: dict[str, int], *, sign: int) -> None:
        for reservation in decision.reservations:
            for share in reservation.shares:
                use = self.use.get(share.node, NO_USE)
                self.use[share.node] = use.plus(demand, pods=share.pods * sign)

    def remove(self, gang: Gang) -> list[tuple[Gang, Outcome]]:
        held = self.view.reservations_of(gang.key)
        self._account(Placed(domain=gang.key, reservations=held), self.demand.pop(gang.key),
                      sign=-1)  # fmt: skip
        return super().remove(gang)

    def check(self) -> None:
        """Besides ``ours``' checks: no pod on a ruled-out tray, memory never over-committed."""
        super().check()
        for reservation in self.view.reservations:
            for share in reservation.shares:
                assert int(share.node.rsplit("tray", 1)[1]) < OPEN_TRAYS, "a ruled-out tray"
        memory = 960 * 2**30 * 1000
        assert all(use.requested.get("memory", 0) <= memory for use in self.use.values())


def open_cliques(cliques: Sequence[Clique]) -> list[Clique]:
    """The same cliques with only the trays the constraints leave."""
    return [
        msgspec.structs.replace(clique, nodes=tuple(n for n in clique.nodes if n.slot < OPEN_TRAYS))
        for clique in cliques
    ]


def open_capacity(racks: int) -> int:
    return racks * OPEN_TRAYS * GPUS_PER_NODE
