"""What a gang's pods need of a node besides GPUs, read from their specs (pure).

The pods of one gang come from one template, so they usually agree; when they do not, the
gang is placed for the worst case of them all: a node must suit every distinct pod spec
(node selector, required node affinity, tolerations, required anti-affinity), and a pod
counts the largest request of any of them, resource by resource. Preferred node affinity
comes from the first pod spec (by pod name); it only breaks ties.

GPUs (``nvidia.com/gpu``) are left out of the requests: the engine counts them itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import msgspec

from shared.crds.names import GPU_RESOURCE
from shared.kube.affinity import LabelSelector, NodeSelector, PreferredSchedulingTerm
from shared.kube.models import Pod, Toleration
from shared.scheduling.requests import pod_requests

_S = TypeVar("_S", bound=msgspec.Struct)


class AntiAffinity(msgspec.Struct, frozen=True, kw_only=True):
    """One required pod anti-affinity term: no pod it selects may share ``topology_key``'s
    value with the new pod's node. ``namespaces`` empty: the pod's own namespace."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]


class PlacementRules(msgspec.Struct, frozen=True, kw_only=True):
    """The filtering part of one distinct pod spec."""

    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    node_affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    anti_affinity: tuple[AntiAffinity, ...] = ()


class GangNeeds(msgspec.Struct, frozen=True, kw_only=True):
    """What every pod of the gang needs of a node."""

    namespace: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    """The first pod's labels: whether an anti-affinity term selects the gang's own pods."""
    rules: tuple[PlacementRules, ...] = (PlacementRules(),)
    requests: dict[str, int] = msgspec.field(default_factory=dict)
    """Per resource (milli-units), the most any pod requests; GPUs left out."""
    preferred: tuple[PreferredSchedulingTerm, ...] = ()

    @property
    def anti_affinity(self) -> tuple[AntiAffinity, ...]:
        return _distinct(term for rule in self.rules for term in rule.anti_affinity)


def _distinct(items: Iterable[_S]) -> tuple[_S, ...]:
    """``items`` without repeats, in order (Structs holding dicts do not hash: compare JSON)."""
    seen: dict[bytes, _S] = {}
    for item in items:
        seen.setdefault(msgspec.json.encode(item), item)
    return tuple(seen.values())


def _rules(pod: Pod) -> PlacementRules:
    spec = pod.spec
    affinity = spec.affinity
    required = None
    anti: tuple[AntiAffinity, ...] = ()
    if affinity is not None:
        if affinity.node_affinity is not None:
            required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
        if affinity.pod_anti_affinity is not None:
            terms = affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
            anti = tuple(
                AntiAffinity(
                    topology_key=term.topology_key,
                    selector=term.label_selector,
                    namespaces=frozenset(term.namespaces or (pod.metadata.namespace,)),
                )
                for term in terms
            )
    return PlacementRules(
        node_selector=spec.node_selector,
        node_affinity=required,
        tolerations=spec.tolerations,
        anti_affinity=anti,
    )


def _without_pin(rules: PlacementRules, pin_label: str) -> PlacementRules:
    """The allocator's own pin (a hostname nodeSelector it wrote) is no constraint to meet."""
    if pin_label not in rules.node_selector:
        return rules
    selector = {k: v for k, v in rules.node_selector.items() if k != pin_label}
    return msgspec.structs.replace(rules, node_selector=selector)


def pod_requests_of(pod: Pod) -> dict[str, int]:
    """What one pod requests (milli-units), GPUs left out."""
    found = pod_requests(pod.spec.containers, pod.spec.init_containers, pod.spec.overhead)
    return {name: amount for name, amount in found.requests.items() if name != GPU_RESOURCE}


def gang_needs(pods: Sequence[Pod], *, pin_label: str) -> GangNeeds:
    """The needs of the gang made of ``pods`` (see the module docstring)."""
    ordered = sorted(pods, key=lambda pod: pod.metadata.name)
    if not ordered:
        return GangNeeds()
    rules = _distinct(_without_pin(_rules(pod), pin_label) for pod in ordered)
    requests: dict[str, int] = {}
    for pod in ordered:
        for name, amount in pod_requests_of(pod).items():
            requests[name] = max(requests.get(name, 0), amount)
    first = ordered[0]
    affinity = first.spec.affinity
    preferred: tuple[PreferredSchedulingTerm, ...] = ()
    if affinity is not None and affinity.node_affinity is not None:
        preferred = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    return GangNeeds(
        namespace=first.metadata.namespace,
        labels=first.metadata.labels,
        rules=rules,
        requests=requests,
        preferred=preferred,
    )
