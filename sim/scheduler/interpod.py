"""Required inter-pod affinity and anti-affinity, kube-scheduler's way.

Before the nodes are filtered, :func:`interpod_state` counts once, per topology pair
(``topologyKey``, the label's value on a pod's node), the bound and assumed pods that:

- match *all* of the incoming pod's affinity terms (``affinity``);
- match each of its anti-affinity terms (``anti``);
- and the pairs where an existing pod's own required anti-affinity rejects the incoming pod
  (``forbidden``, the symmetric rule).

The per-node filter then only looks pairs up, so a scheduling cycle costs the matching pods
once plus one dictionary lookup per node and term, never pods x nodes.

The first pod of a group may go anywhere: when no pod anywhere matches the affinity terms and
the pod matches its own terms, affinity does not filter (as in kube-scheduler); a node without
the topology label still fails affinity, and passes anti-affinity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import msgspec

from sim.scheduler.facts import AffinityTerm, NodeFacts, PodFacts
from sim.scheduler.filters import Reasons
from sim.scheduler.selectors import label_selector_matches

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Pair = tuple[str, str]


class PodLookup(Protocol):
    """Read access to the bound and assumed pods, with the indexes a term needs."""

    def pods_in_namespace(self, namespace: str) -> Iterable[PodFacts]: ...

    def pods_with_label(self, key: str, value: str) -> Iterable[PodFacts]: ...

    def all_pods(self) -> Iterable[PodFacts]: ...

    def pods_with_anti_affinity(self) -> Iterable[PodFacts]: ...

    def node_labels(self, node_name: str) -> Mapping[str, str] | None: ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str]: ...


class InterPodState(msgspec.Struct, frozen=True, kw_only=True):
    affinity: dict[Pair, int] = msgspec.field(default_factory=dict)
    anti: dict[Pair, int] = msgspec.field(default_factory=dict)
    forbidden: dict[str, frozenset[str]] = msgspec.field(default_factory=dict)
    matches_own_terms: bool = False


def term_selects(
    term: AffinityTerm,
    *,
    namespace: str,
    labels: Mapping[str, str],
    namespace_labels: Mapping[str, str] | None,
) -> bool:
    """Whether ``term`` selects a pod in ``namespace`` with ``labels``."""
    if term.selector is None:
        return False  # a term without a label selector selects no pod
    if namespace not in term.namespaces:
        if term.namespace_selector is None or namespace_labels is None:
            return False
        if not label_selector_matches(term.namespace_selector, namespace_labels):
            return False
    return label_selector_matches(term.selector, labels)


def _candidates(term: AffinityTerm, pods: PodLookup) -> Iterable[PodFacts]:
    """A superset of the pods ``term`` can select, from the narrowest index at hand."""
    selector = term.selector
    if selector is None:
        return ()
    if selector.match_labels:
        key, value = next(iter(selector.match_labels.items()))
        return pods.pods_with_label(key, value)
    if term.namespace_selector is None:
        return [p for ns in sorted(term.namespaces) for p in pods.pods_in_namespace(ns)]
    return pods.all_pods()


def _selects(term: AffinityTerm, pod: PodFacts, pods: PodLookup) -> bool:
    return term_selects(
        term,
        namespace=pod.namespace,
        labels=pod.labels,
        namespace_labels=pods.namespace_labels(pod.namespace),
    )


def interpod_state(pod: PodFacts, pods: PodLookup) -> InterPodState:
    """The counts the affinity filter needs for ``pod`` (see the module docstring)."""
    affinity: dict[Pair, int] = {}
    if pod.affinity:
        first = pod.affinity[0]
        for other in _candidates(first, pods):
            if other.key == pod.key or not all(_selects(t, other, pods) for t in pod.affinity):
                continue
            node_labels = pods.node_labels(other.node_name)
            if node_labels is None:
                continue
            for term in pod.affinity:
                value = node_labels.get(term.topology_key)
                if value is not None:
                    pair = (term.topology_key, value)
                    affinity[pair] = affinity.get(pair, 0) + 1
    anti: dict[Pair, int] = {}
    for term in pod.anti_affinity:
        for other in _candidates(term, pods):
            if other.key == pod.key or not _selects(term, other, pods):
                continue
            node_labels = pods.node_labels(other.node_name)
            value = node_labels.get(term.topology_key) if node_labels is not None else None
            if value is not None:
                pair = (term.topology_key, value)
                anti[pair] = anti.get(pair, 0) + 1
    forbidden: dict[str, set[str]] = {}
    own_namespace_labels = pods.namespace_labels(pod.namespace)
    for other in pods.pods_with_anti_affinity():
        if other.key == pod.key:
            continue
        node_labels = pods.node_labels(other.node_name)
        if node_labels is None:
            continue
        for term in other.anti_affinity:
            value = node_labels.get(term.topology_key)
            if value is not None and term_selects(
                term,
                namespace=pod.namespace,
                labels=pod.labels,
                namespace_labels=own_namespace_labels,
            ):
                forbidden.setdefault(term.topology_key, set()).add(value)
    matches_own = bool(pod.affinity) and all(
        term_selects(
            t, namespace=pod.namespace, labels=pod.labels, namespace_labels=own_namespace_labels
        )
        for t in pod.affinity
    )
    return InterPodState(
        affinity=affinity,
        anti=anti,
        forbidden={k: frozenset(v) for k, v in forbidden.items()},
        matches_own_terms=matches_own,
    )


def filter_interpod(pod: PodFacts, node: NodeFacts, state: InterPodState) -> Reasons:
    labels = node.labels
    if pod.affinity:
        pods_exist = True
        for term in pod.affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return (AFFINITY,)  # every topology label must exist, even for a first pod
            if state.affinity.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        if not pods_exist and not (not state.affinity and state.matches_own_terms):
            return (AFFINITY,)
    for term in pod.anti_affinity:
        value = labels.get(term.topology_key)
        if value is not None and state.anti.get((term.topology_key, value), 0) > 0:
            return (ANTI_AFFINITY,)
    for key, values in state.forbidden.items():
        if labels.get(key) in values:
            return (EXISTING_ANTI_AFFINITY,)
    return ()
