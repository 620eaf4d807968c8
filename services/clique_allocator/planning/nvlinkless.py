"""Domains that run without IMEX: no node their pods can use has multi-node NVLink (pure).

NVIDIA's driver runs a ComputeDomain on nodes without a clique too: nothing is injected and the
job's collective library uses another transport. cdo does the same, per domain:

- a domain with no record yet runs without IMEX when no clique can take even one of its pods
  (there is no clique, none has a node for pods of its size, or the pods' own constraints rule
  out every clique node that has) and at least one GPU node on
  no NVLink fabric takes new pods (``cdo.dev/multi-node-nvlink=false``, see ``nodes.py``);
- its record says so (``multiNodeNvlink: false``, no slices, no channel) and keeps saying so for
  the domain's life: a clique that appears later does not move pods that already run;
- its gated pods are released to the scheduler without a node: it places them by their own
  constraints, as for any pod; the IMEX agent prepares their channel claims without a channel.

When neither a clique nor such a node can take the pods, the domain waits in the usual way
(the engine's reason).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.clique_allocator.planning.hold import waited
from services.clique_allocator.planning.notices import Notice
from services.clique_allocator.planning.outcome import Pin, Plan
from services.clique_allocator.planning.pods import DomainPods
from shared.crds.placement import PlacementSpec
from shared.kube.models import Pod

WITHOUT_NVLINK = "PlacedWithoutNvlink"
WITHOUT_NVLINK_MESSAGE = (
    "no node the domain's pods can use has multi-node NVLink: the domain runs without IMEX, "
    "its pods are placed by the scheduler and get no IMEX channel"
)


def runs_without_nvlink(placement: PlacementSpec | None, *, clique_room: int, nodes: int) -> bool:
    """Whether the domain runs without IMEX (see the module docstring): ``clique_room`` is the
    most of its pods one clique takes when empty (on the nodes its pods' constraints allow),
    ``nodes`` counts the GPU nodes on no NVLink fabric that take new pods."""
    if placement is not None:
        return not placement.multi_node_nvlink
    return nodes > 0 and clique_room == 0


def record_without_nvlink(*, gpus_per_pod: int, size: int) -> PlacementSpec:
    return PlacementSpec(gpus_per_pod=gpus_per_pod, size=size, multi_node_nvlink=False)


def released_pods(waiting: Sequence[Pod]) -> tuple[str, ...]:
    """The gated pods to hand to the scheduler, by name."""
    return tuple(sorted(pod.metadata.name for pod in waiting))


def plan_without_nvlink(
    placement: PlacementSpec | None, pods: DomainPods, *, gpus_per_pod: int, size: int
) -> Plan:
    """Release every gated pod to the scheduler; the record says the domain runs without IMEX."""
    record = record_without_nvlink(gpus_per_pod=gpus_per_pod, size=size)
    released = tuple(
        Pin(pod=name, node="", waited=waited(pods.by_name[name]))
        for name in released_pods(pods.waiting)
    )
    notices = (
        (Notice(type="Normal", reason=WITHOUT_NVLINK, message=WITHOUT_NVLINK_MESSAGE),)
        if placement is None
        else ()
    )
    return Plan(
        action="keep" if record == placement else "write",
        record=record,
        pins=(*pods.repins, *released),
        notices=notices,
    )
