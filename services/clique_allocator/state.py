"""The engine's view of the cluster, built from the caches and kept current.

The view is rebuilt from scratch (nodes, every Placement through the book, pods that hold GPUs
outside any Placement) when something it depends on changed in a way the allocator did not
cause itself: a node's facts, a Placement someone else wrote, a pod binding or ending outside
the allocator's records. After its own decisions the allocator advances the view by copy
(``advance``), which costs only the cliques the domain touches.

What the pods on each node request besides GPUs (``usage.py``) is a table of its own, built
lazily when a gang asks for its node limits and dropped whenever the view is, whenever a record
changes (``advance``) and whenever a pod outside the records binds or ends
(``usage_changed``); a gang's limits (``eligibility.py``) are worked out from it and the node
facts for every decision.

GPUs held by pods that no Placement accounts for (pods of other workloads asking for
``nvidia.com/gpu``, or a domain's pod scheduled without the allocator) count as a pseudo
reservation in no clique, so they are never given out twice either. So do DRA GPUs
(``dragpus.py``) that are tainted or allocated to claims of pods no Placement seats: a node
that serves both ways counts its GPUs once, and what either way holds is taken from that.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec

from services.clique_allocator.caches import Caches
from services.clique_allocator.eligibility import LimitsMemo, node_limits
from services.clique_allocator.needs import gang_needs
from services.clique_allocator.nodes import NodeFacts, build_cliques, node_facts, without_nvlink
from services.clique_allocator.placement import ClusterView, NodeLimits, Reservation
from services.clique_allocator.planning.unitrecords import recorded_reservations
from services.clique_allocator.records import foreign_reservation
from services.clique_allocator.units import in_domain
from services.clique_allocator.usage import UsageTable, usage_table
from shared.crds.names import GPU_RESOURCE, HOSTNAME_LABEL
from shared.crds.placement import Placement
from shared.kube.models import Pod
from shared.kube.ownwrites import OwnWrites

log = logging.getLogger("cdo.clique_allocator")

MEMOS_KEPT = 256
"""Distinct gang needs whose limits memos are kept before they start afresh."""


class ClusterState:
    """The current :class:`ClusterView` and node facts, rebuilt lazily after invalidation."""

    def __init__(self, caches: Caches, book: OwnWrites[Placement]) -> None:
        self._caches = caches
        self._book = book
        self._view: ClusterView | None = None
        self._facts: dict[str, NodeFacts] = {}
        self._without_nvlink = 0
        self._usage: UsageTable | None = None
        self._memos: dict[bytes, LimitsMemo] = {}
        """Per gang needs (their JSON): what their limits reuse while the nodes stay the same."""
        self.rebuilds = 0

    def invalidate(self) -> None:
        self._view = None
        self._usage = None

    def usage_changed(self) -> None:
        """A pod outside the records bound to a node or ended: requests on nodes changed."""
        self._usage = None

    def limits(self, domain: str, pods: Sequence[Pod], gpus_per_pod: int) -> NodeLimits | None:
        """Where the pods of ``domain``'s gang can be scheduled (``eligibility.py``); None
        when their constraints rule out and cap no node."""
        facts = self.facts()
        needs = gang_needs(pods, pin_label=HOSTNAME_LABEL)
        key = msgspec.json.encode((needs, gpus_per_pod))
        if key not in self._memos and len(self._memos) > MEMOS_KEPT:
            self._memos.clear()
        limits = node_limits(
            needs,
            nodes=facts.values(),
            others=self._usage_table().others(domain),
            neighbours=self._usage_table().neighbours if needs.anti_affinity else (),
            gpus_per_pod=gpus_per_pod,
            memo=self._memos.setdefault(key, LimitsMemo()),
        )
        return limits if limits.nodes else None

    def _usage_table(self) -> UsageTable:
        if self._usage is None:
            cached = self._caches.placements.cache
            placements = {
                key: found
                for key in sorted(set(cached.keys()) | set(self._book.keys()))
                if (found := self._book.current(key, cached.get(key))) is not None
            }
            pods = self._caches.pods.cache
            self._usage = usage_table(
                gpu_nodes=self._facts,
                placements=placements,
                pod=pods.get,
                bound=self._caches.pods_on,
                holders=self._caches.attachment_holders(),
            )
        return self._usage

    def own_pods(self, domain: str) -> dict[str, int]:
        """Per node, the pods (slots and seats without GPUs) ``domain``'s record holds there."""
        return {node: use.pods for node, use in self._usage_table().own(domain).items()}

    def free_attachments(self) -> dict[str, int]:
        """Per node whose cdo ResourceSlice is known, its attachment devices nobody holds
        (``attachments.py``)."""
        total = self._usage_table().total
        free: dict[str, int] = {}
        for name, facts in self.facts().items():
            if facts.attachments is not None:
                held = total[name].attachments if name in total else 0
                free[name] = max(0, facts.attachments - held)
        return free

    def view(self) -> ClusterView:
        if self._view is None:
            self._view = self._build()
        return self._view

    def facts(self) -> dict[str, NodeFacts]:
        """Facts of every node that takes part in placement, as of the current view."""
        self.view()
        return self._facts

    def nodes_without_nvlink(self) -> int:
        """GPU nodes on no NVLink fabric that take new pods, as of the current view."""
        self.view()
        return self._without_nvlink

    def advance(self, domain: str, reservations: Sequence[Reservation]) -> None:
        """The allocator recorded ``reservations`` for ``domain`` (none: deleted its record);
        a domain in gang units holds them under its units' keys (``units.py``)."""
        if self._view is not None:
            by_key: dict[str, list[Reservation]] = {domain: []}
            for key in self._view.domains:
                if in_domain(key, domain):
                    by_key[key] = []
            for reservation in reservations:
                by_key.setdefault(reservation.domain, []).append(reservation)
            view = self._view
            for key, held in sorted(by_key.items()):
                view = view.with_domain(key, held)
            self._view = view
        self._usage = None

    def _build(self) -> ClusterView:
        self.rebuilds += 1
        reservations, recorded = self._recorded()
        dra = self._caches.dra_gpus(recorded)
        attachments = self._caches.attachments()
        facts = [
            found
            for node in self._caches.nodes.cache.objects()
            if (
                found := node_facts(
                    node,
                    dra.get(node.metadata.name),
                    attachments=attachments.get(node.metadata.name),
                )
            )
            is not None
        ]
        self._facts = {f.name: f for f in facts}
        self._memos = {}
        self._without_nvlink = sum(
            1
            for node in self._caches.nodes.cache.objects()
            if without_nvlink(node, dra.get(node.metadata.name))
        )
        foreign: dict[str, int] = {name: gpus.unavailable for name, gpus in dra.items()}
        for node, pods in self._caches.gpu_pods():
            for pod in pods:
                if (pod.metadata.namespace, pod.metadata.name) not in recorded:
                    foreign[node] = foreign.get(node, 0) + pod.gpus(GPU_RESOURCE)
        outside = foreign_reservation(foreign)
        if outside is not None:
            reservations.append(outside)
        return ClusterView.build(cliques=build_cliques(facts), reservations=reservations)

    def _recorded(self) -> tuple[list[Reservation], set[tuple[str, str]]]:
        """Every Placement's reservations, and the (namespace, pod) they seat."""
        reservations: list[Reservation] = []
        recorded: set[tuple[str, str]] = set()
        cached = self._caches.placements.cache
        for key in sorted(set(cached.keys()) | set(self._book.keys())):
            placement = self._book.current(key, cached.get(key))
            if placement is None:
                continue
            reservations.extend(recorded_reservations(key, placement.spec))
            namespace = placement.metadata.namespace
            recorded.update(
                (namespace, pod.name)
                for piece in placement.spec.all_slices
                for member in piece.members
                for pod in member.pods
            )
        return reservations, recorded
