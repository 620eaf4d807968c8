"""The engine's view of the cluster, built from the caches and kept current.

The view is rebuilt from scratch (nodes, every Placement through the book, pods that hold GPUs
outside any Placement) when something it depends on changed in a way the allocator did not
cause itself: a node's facts, a Placement someone else wrote, a pod binding or ending outside
the allocator's records. After its own decisions the allocator advances the view by copy
(``advance``), which costs only the cliques the domain touches.

GPUs held by pods that no Placement accounts for (pods of other workloads asking for
``nvidia.com/gpu``, or a domain's pod scheduled without the allocator) count as a pseudo
reservation in no clique, so they are never given out twice either. So do DRA GPUs
(``dragpus.py``) that are tainted or allocated to claims of pods no Placement seats: a node
that serves both ways counts its GPUs once, and what either way holds is taken from that.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from services.clique_allocator.caches import Caches
from services.clique_allocator.nodes import NodeFacts, build_cliques, node_facts, without_nvlink
from services.clique_allocator.placement import ClusterView, Reservation
from services.clique_allocator.planning.slices import reservations_of
from services.clique_allocator.records import foreign_reservation
from shared.crds.names import GPU_RESOURCE
from shared.crds.placement import Placement
from shared.kube.ownwrites import OwnWrites

log = logging.getLogger("cdo.clique_allocator")


class ClusterState:
    """The current :class:`ClusterView` and node facts, rebuilt lazily after invalidation."""

    def __init__(self, caches: Caches, book: OwnWrites[Placement]) -> None:
        self._caches = caches
        self._book = book
        self._view: ClusterView | None = None
        self._facts: dict[str, NodeFacts] = {}
        self._without_nvlink = 0
        self.rebuilds = 0

    def invalidate(self) -> None:
        self._view = None

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
        """The allocator recorded ``reservations`` for ``domain`` (none: deleted its record)."""
        if self._view is not None:
            self._view = self._view.with_domain(domain, reservations)

    def _build(self) -> ClusterView:
        self.rebuilds += 1
        reservations, recorded = self._recorded()
        dra = self._caches.dra_gpus(recorded)
        facts = [
            found
            for node in self._caches.nodes.cache.objects()
            if (found := node_facts(node, dra.get(node.metadata.name))) is not None
        ]
        self._facts = {f.name: f for f in facts}
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
            if placement is None or placement.spec.gpus_per_pod < 1:
                continue
            reservations.extend(reservations_of(key, placement.spec))
            namespace = placement.metadata.namespace
            recorded.update(
                (namespace, pod.name)
                for piece in placement.spec.all_slices
                for member in piece.members
                for pod in member.pods
            )
        return reservations, recorded
