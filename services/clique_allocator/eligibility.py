"""Which GPU nodes a gang's pods can really be scheduled on, and how many fit each (pure).

kube-scheduler binds a pinned pod only where its filters pass; a pod pinned anywhere else stays
Pending. So before the engine places a gang, :func:`node_limits` checks every usable GPU node
against the gang's needs (``needs.py``), in kube-scheduler's order, and stops at the first
filter that fails:

1. **taints**: a NoSchedule or NoExecute taint no toleration of the pods tolerates (the
   health model's own taints are ``nodes.py``'s and keep the node unusable anyway);
2. **node selector and required node affinity** against the node's labels and name;
3. **resources**: the node's allocatable CPU, memory, ephemeral storage, other extended
   resources and pod count, less what every other pod there requests (``others``: bound pods,
   and the slots other domains' Placements hold there, bound yet or not), must take one more pod
   of the gang; so must the node's channel attachment devices (``attachments.py``, when the
   allocator has seen the node's slice) less those others hold, for pods that take GPUs; how
   many it takes in all becomes the node's cap;
4. **required pod anti-affinity**: no pod a term selects (``neighbours``: bound, pinned or
   recorded pods) may be on a node with the same ``topologyKey`` value; a term that selects the
   gang's own pods with ``kubernetes.io/hostname`` allows one pod of the gang per node.

Cordoned and unhealthy nodes are already unusable to the engine. Preferred node affinity
weights break ties between nodes. ``why`` names the nodes ruled out or capped, by reason and
clique, for the gang's wait message. ``gpus_per_pod`` 0 asks for the limits of pods that take
no GPU (``planning/channelonly.py``): no GPU bound, no attachment cap (they weigh a node's free
devices themselves), and their caps are left out of ``why``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from services.clique_allocator.needs import AntiAffinity, GangNeeds
from services.clique_allocator.nodes import NodeFacts
from services.clique_allocator.placement import NodeLimits
from services.clique_allocator.placement.messages import plural
from shared.crds.names import HOSTNAME_LABEL
from shared.scheduling.requests import PODS, insufficient, pods_that_fit
from shared.scheduling.selectors import (
    label_selector_matches,
    node_term_matches,
    pod_matches_node,
)
from shared.scheduling.taints import untolerated_taint

MOST_GROUPS = 3
"""Groups of nodes (reason, clique) a message names; the rest are counted."""
ATTACHMENT_DEVICE = "IMEX channel attachment device"
CHANNEL_ONLY_MOST = 1 << 16
"""The most pods that ask for no GPU a node could take, before its resources say less."""


class NodeUse(msgspec.Struct, frozen=True, kw_only=True):
    """What pods on a node request together (milli-units), how many they are, and how many
    channel attachment devices they hold (``attachments.py``)."""

    requested: dict[str, int] = msgspec.field(default_factory=dict)
    pods: int = 0
    attachments: int = 0

    def plus(self, requests: Mapping[str, int], *, pods: int = 1, attachments: int = 0) -> NodeUse:
        """This use with ``pods`` more pods of ``requests`` each, holding ``attachments``."""
        total = dict(self.requested)
        for name, amount in requests.items():
            total[name] = total.get(name, 0) + amount * pods
        return NodeUse(
            requested=total, pods=self.pods + pods, attachments=self.attachments + attachments
        )

    def add(self, other: NodeUse) -> NodeUse:
        """This use and ``other`` together."""
        return msgspec.structs.replace(
            self.plus(other.requested),
            pods=self.pods + other.pods,
            attachments=self.attachments + other.attachments,
        )

    def minus(self, other: NodeUse) -> NodeUse:
        """This use without ``other`` (which it includes)."""
        return self.add(
            NodeUse(
                requested={name: -amount for name, amount in other.requested.items()},
                pods=-other.pods,
                attachments=-other.attachments,
            )
        )


NO_USE = NodeUse()


class Neighbour(msgspec.Struct, frozen=True, kw_only=True):
    """A pod on (or promised to) a GPU node, as anti-affinity terms see it."""

    node: str
    namespace: str
    labels: dict[str, str]


def _selects(term: AntiAffinity, *, namespace: str, labels: Mapping[str, str]) -> bool:
    if term.selector is None or namespace not in term.namespaces:
        return False
    return label_selector_matches(term.selector, labels)


def _forbidden(
    terms: Sequence[AntiAffinity],
    neighbours: Iterable[Neighbour],
    labels_of: Mapping[str, NodeFacts],
) -> set[tuple[str, str]]:
    """(topology key, value) pairs where a pod some term selects already is."""
    pairs: set[tuple[str, str]] = set()
    for pod in neighbours:
        node = labels_of.get(pod.node)
        if node is None:
            continue
        for term in terms:
            value = node.labels.get(term.topology_key)
            if value is not None and _selects(term, namespace=pod.namespace, labels=pod.labels):
                pairs.add((term.topology_key, value))
    return pairs


def _filtered(needs: GangNeeds, node: NodeFacts) -> str | None:
    """Why no pod of the gang passes the node's taint and affinity filters, or None."""
    for rules in needs.rules:
        taint = untolerated_taint(node.taints, rules.tolerations)
        if taint is not None:
            value = f"={taint.value}" if taint.value else ""
            return f"lack{{s}} the toleration for {taint.key}{value}:{taint.effect}"
    for rules in needs.rules:
        if not pod_matches_node(
            rules.node_selector, rules.node_affinity, name=node.name, labels=node.labels
        ):
            return "do{es} not match the pods' node selector or node affinity"
    return None


def _cap(
    needs: GangNeeds, node: NodeFacts, use: NodeUse, most: int, *, attachments: bool
) -> tuple[int, str | None]:
    """Pods of the gang the node holds in all by its resources (and its free channel attachment
    devices, with ``attachments``), and what is short at zero."""
    fits = pods_that_fit(
        needs.requests,
        allocatable=node.allocatable,
        requested=use.requested,
        pods=use.pods,
        most=most,
    )
    free = (
        node.attachments - use.attachments if attachments and node.attachments is not None else None
    )
    if free is not None:
        fits = min(fits, max(0, free))
    if fits > 0:
        return fits, None
    short = insufficient(
        needs.requests, allocatable=node.allocatable, requested=use.requested, pods=use.pods
    )
    if not short and free is not None and free <= 0:
        return 0, f"ha{{ve}} no free {ATTACHMENT_DEVICE}"
    named = ", ".join("pod room" if name == PODS else name for name in short) or "resources"
    return 0, f"lack{{s}} the {named} a pod asks for"


Filtered = dict[str, str | None]
"""Per node, why the taint and affinity filters keep the gang's pods off it (None: they pass)."""


def filter_nodes(needs: GangNeeds, nodes: Iterable[NodeFacts]) -> Filtered:
    """The taint and affinity filters for every usable node: they depend on the pod specs and
    the nodes only, so a caller may keep the answer until either changes."""
    return {node.name: _filtered(needs, node) for node in nodes if node.usable}


class LimitsMemo:
    """What a caller keeps per gang needs and pod size between decisions, while the nodes stay
    the same:
    the filters' answers, each node's fit with the use (the very object) it was worked out
    for, and the last limits (returned again, the same object, when nothing changed, so that
    the engine's view of them can be reused too)."""

    def __init__(self) -> None:
        self.filtered: Filtered | None = None
        self.usable: list[NodeFacts] | None = None
        self.excluded: dict[str, str] = {}
        """The nodes the filters rule out, and why."""
        self.passing: list[tuple[NodeFacts, int]] = []
        """Usable nodes the filters pass, in order, with the gang's pods their GPUs take."""
        self.fits: dict[str, tuple[NodeUse, tuple[int, str | None]]] = {}
        self.last: NodeLimits | None = None


class _Verdicts(msgspec.Struct, kw_only=True):
    excluded: dict[str, str] = msgspec.field(default_factory=dict)
    most_pods: dict[str, int] = msgspec.field(default_factory=dict)


def node_limits(
    needs: GangNeeds,
    *,
    nodes: Iterable[NodeFacts],
    others: Mapping[str, NodeUse],
    neighbours: Iterable[Neighbour] = (),
    gpus_per_pod: int,
    memo: LimitsMemo | None = None,
) -> NodeLimits:
    """The gang's limits on ``nodes`` (see the module docstring); ``memo``: kept by the caller
    for these needs and nodes (:class:`LimitsMemo`)."""
    memo = memo or LimitsMemo()
    if memo.usable is None or memo.filtered is None:
        memo.usable = [node for node in nodes if node.usable]
        memo.filtered = filter_nodes(needs, memo.usable)
        memo.excluded = {name: why for name, why in memo.filtered.items() if why is not None}
        memo.passing = [
            (node, node.gpus // gpus_per_pod if gpus_per_pod else CHANNEL_ONLY_MOST)
            for node in memo.usable
            if memo.filtered[node.name] is None
        ]
    usable = memo.usable
    verdicts = _verdicts(needs, usable, others, neighbours, gpus_per_pod, memo)
    preferred = _preferred(needs, usable)
    last = memo.last
    if (
        last is not None
        and last.excluded == verdicts.excluded.keys()
        and (last.most_pods, last.preferred) == (verdicts.most_pods, preferred)
    ):
        return last
    by_name = {node.name: node for node in usable}
    limited = verdicts.excluded.keys() | verdicts.most_pods.keys() | preferred.keys()
    # Pods without GPUs take no node's GPUs: their caps are their room, not a limit to name.
    capped = verdicts.most_pods if gpus_per_pod else {}
    memo.last = NodeLimits(
        excluded=frozenset(verdicts.excluded),
        most_pods=verdicts.most_pods,
        preferred=preferred,
        why=_why(verdicts.excluded, capped, by_name),
        cliques=frozenset(by_name[name].clique for name in limited),
    )
    return memo.last


def _verdicts(
    needs: GangNeeds,
    usable: Sequence[NodeFacts],
    others: Mapping[str, NodeUse],
    neighbours: Iterable[Neighbour],
    gpus_per_pod: int,
    memo: LimitsMemo,
) -> _Verdicts:
    """Each node's exclusion (the first filter that fails) or cap, in filter order."""
    assert memo.filtered is not None
    terms = needs.anti_affinity
    forbidden = _forbidden(terms, neighbours, {n.name: n for n in usable}) if terms else set()
    one_per_node = any(
        term.topology_key == HOSTNAME_LABEL
        and _selects(term, namespace=needs.namespace, labels=needs.labels)
        for term in terms
    )
    out = _Verdicts(excluded=dict(memo.excluded))
    fits = memo.fits
    # Nodes alike share their allocatable mapping (``nodes.py``) and most share no use at all,
    # so a fit is worked out once per (allocatable, use, GPU room), and kept per node with the
    # use (the object) it was worked out for.
    fit_of: dict[tuple[int, int, int, int | None], tuple[int, str | None]] = {}
    # Pods that take GPUs are capped by the attachment devices others leave; pods without
    # GPUs judge a node's free devices themselves (``planning/channelonly.py``).
    attachments = gpus_per_pod > 0
    for node, most in memo.passing:
        name = node.name
        use = others.get(name, NO_USE)
        known = fits.get(name)
        if known is not None and known[0] is use:
            room, why = known[1]
        else:
            key = (id(node.allocatable), id(use), most, node.attachments)
            found = fit_of.get(key) or fit_of.setdefault(
                key, _cap(needs, node, use, most, attachments=attachments)
            )
            fits[name] = (use, found)
            room, why = found
        if why is None and terms and _near(node, terms, forbidden):
            why = "hold{s} pods the pods' anti-affinity keeps them from"
        if why is not None:
            out.excluded[name] = why
        elif (room := min(room, 1) if one_per_node else room) < most:
            out.most_pods[name] = room
    return out


def _near(node: NodeFacts, terms: Sequence[AntiAffinity], forbidden: set[tuple[str, str]]) -> bool:
    """The node shares a term's topology value with a pod the term selects."""
    return any(
        (term.topology_key, node.labels.get(term.topology_key)) in forbidden for term in terms
    )


def _preferred(needs: GangNeeds, nodes: Sequence[NodeFacts]) -> dict[str, int]:
    if not needs.preferred:
        return {}
    weights: dict[str, int] = {}
    for node in nodes:
        weight = sum(
            term.weight
            for term in needs.preferred
            if node_term_matches(term.preference, name=node.name, labels=node.labels)
        )
        if weight:
            weights[node.name] = weight
    return weights


def _why(
    excluded: Mapping[str, str], capped: Mapping[str, int], nodes: Mapping[str, NodeFacts]
) -> str:
    """``N nodes of clique C <reason>`` per group, largest groups first."""
    groups: dict[tuple[str, str], int] = {}
    for name, reason in excluded.items():
        key = (reason, nodes[name].clique)
        groups[key] = groups.get(key, 0) + 1
    for name, fits in capped.items():
        key = (
            f"ha{{ve}} room (CPU, memory, storage, pods, attachment devices) for only {fits} "
            "of its pods",
            nodes[name].clique,
        )
        groups[key] = groups.get(key, 0) + 1
    ordered = sorted(groups.items(), key=lambda item: (-item[1], item[0]))
    parts = [_group(count, reason, clique) for (reason, clique), count in ordered[:MOST_GROUPS]]
    rest = sum(count for _, count in ordered[MOST_GROUPS:])
    if rest:
        parts.append(f"{rest} more node{plural(rest)} for other reasons")
    return "; ".join(parts)


def _group(count: int, reason: str, clique: str) -> str:
    verb = reason.format(
        s="" if count != 1 else "s", es="" if count != 1 else "es", ve="ve" if count != 1 else "s"
    )
    return f"{count} node{plural(count)} of clique {clique} {verb}"
