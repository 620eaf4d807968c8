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

from shared.crds.placement import PlacementSpec
from shared.kube.models import Pod


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
