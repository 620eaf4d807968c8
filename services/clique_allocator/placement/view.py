"""The cluster as the engine sees it: clique states plus every reservation, updated by copy.

A :class:`ClusterView` is immutable. ``with_domain`` and ``with_clique`` return a new view that
shares every untouched clique's state with the old one, so the allocator can keep one view,
advance it after each decision, and rebuild it from Kubernetes (``build``) whenever it relists.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from services.clique_allocator.placement.limits import limit_state, own_pods
from services.clique_allocator.placement.model import Clique, NodeLimits, Reservation
from services.clique_allocator.placement.score import pod_shapes
from services.clique_allocator.placement.state import CliqueState, build_clique_state

MEMO_LIMIT = 8192
"""Limited clique states kept (``restricted``) before the memo starts afresh."""


class ClusterView:
    """Cliques (in id order) with their derived state, and the reservations behind it."""

    __slots__ = (
        "_cliques",
        "_domain_cliques",
        "_domains",
        "_largest",
        "_limited",
        "_limits",
        "_node_clique",
        "_room",
        "_shapes",
        "_sizes",
        "_states",
        "_touching",
    )

    _cliques: dict[str, Clique]
    _states: dict[str, CliqueState]
    _domains: dict[str, tuple[Reservation, ...]]
    _node_clique: dict[str, str]
    _touching: dict[str, frozenset[str]]
    """Per clique, the domains whose reservations touch it (channel or node share)."""
    _domain_cliques: dict[str, frozenset[str]]
    _shapes: tuple[int, ...]
    _sizes: tuple[int, ...]
    _room: dict[int, tuple[int, str] | None]
    """Memo per pod size: the most pods one clique takes now, and that clique."""
    _largest: dict[int, tuple[int, int, str] | None]
    """Memo per pod size: the most (pods, nodes) one clique takes when empty, and that clique."""
    _limits: tuple[str, NodeLimits, int] | None
    """(domain, limits, GPUs per pod) when the view is one gang's (:meth:`restricted`)."""
    _limited: dict[tuple[int, int, int], tuple[CliqueState, NodeLimits, CliqueState]]
    """Memo of :meth:`restricted` for gangs with no pods in the clique, shared by every view
    advanced from one another: (state, limits, pod size) -> the limited state. Entries hold
    their keys' objects, so an id is never taken for another object's."""

    @classmethod
    def build(
        cls, *, cliques: Iterable[Clique], reservations: Iterable[Reservation]
    ) -> ClusterView:
        """A view of ``cliques`` with ``reservations`` applied.

        Raises ValueError for input no cluster can produce: a clique id or node name given
        twice, or two reservations for one (domain, slice). Reservations on cliques or nodes
        that are gone are kept (their domain still owns them) but hold no capacity.
        """
        view = cls()
        for clique in sorted(cliques, key=lambda c: c.id):
            if clique.id in view._cliques:
                raise ValueError(f"clique {clique.id} is listed twice")
            view._cliques[clique.id] = clique
            _index_nodes(view._node_clique, clique)
        grouped: dict[str, list[Reservation]] = {}
        for reservation in reservations:
            grouped.setdefault(reservation.domain, []).append(reservation)
        for domain in sorted(grouped):
            held = _ordered(domain, grouped[domain])
            view._domains[domain] = held
            touched = view._cliques_touched(held)
            view._domain_cliques[domain] = touched
            for clique_id in touched:
                view._touching[clique_id] = view._touching.get(clique_id, frozenset()) | {domain}
        for clique_id, clique in view._cliques.items():
            view._states[clique_id] = build_clique_state(clique, view._reservations_in(clique_id))
        view._index_sizes()
        return view

    def __init__(self) -> None:
        self._cliques = {}
        self._states = {}
        self._domains = {}
        self._node_clique = {}
        self._touching = {}
        self._domain_cliques = {}
        self._shapes = ()
        self._sizes = ()
        self._room = {}
        self._largest = {}
        self._limits = None
        self._limited = {}

    @property
    def cliques(self) -> tuple[CliqueState, ...]:
        """Every clique's state, in clique id order."""
        return tuple(self._states.values())

    def clique(self, clique_id: str) -> CliqueState | None:
        return self._states.get(clique_id)

    def clique_of(self, node: str) -> str | None:
        return self._node_clique.get(node)

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(sorted(self._domains))

    def reservations_of(self, domain: str) -> tuple[Reservation, ...]:
        """The domain's reservations, in slice order; empty for a domain new to the cluster."""
        return self._domains.get(domain, ())

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        """Every reservation, by domain then slice."""
        return tuple(r for domain in sorted(self._domains) for r in self._domains[domain])

    @property
    def node_sizes(self) -> tuple[int, ...]:
        """Every distinct node GPU count in the cluster, ascending."""
        return self._sizes

    @property
    def pod_shapes(self) -> tuple[int, ...]:
        """Every pod size that divides some node's GPU count, largest first."""
        return self._shapes

    def most_room(self, gpus_per_pod: int) -> tuple[int, str] | None:
        """The most pods of this size one clique takes now, and the clique (lowest id on a tie).

        Remembered per view: a view never changes, and a queue of waiting gangs is usually
        tried against the same view many times.
        """
        if gpus_per_pod not in self._room:
            self._room[gpus_per_pod] = min(
                ((state.capacity(gpus_per_pod), state.id) for state in self._states.values()),
                key=lambda room: (-room[0], room[1]),
                default=None,
            )
        return self._room[gpus_per_pod]

    def largest_clique(self, gpus_per_pod: int) -> tuple[int, int, str] | None:
        """The most (pods, nodes) of this size one clique takes when empty, and the clique."""
        if gpus_per_pod not in self._largest:
            self._largest[gpus_per_pod] = min(
                ((*state.size_capacity(gpus_per_pod), state.id) for state in self._states.values()),
                key=lambda size: (-size[0], -size[1], size[2]),
                default=None,
            )
        return self._largest[gpus_per_pod]

    def with_domain(self, domain: str, reservations: Iterable[Reservation]) -> ClusterView:
        """This view with ``domain`` holding exactly ``reservations`` (none: the domain is gone)."""
        held = _ordered(domain, list(reservations))
        before = self._domain_cliques.get(domain, frozenset())
        after = self._cliques_touched(held)
        view = self._copy()
        if held:
            view._domains[domain] = held
            view._domain_cliques[domain] = after
        else:
            view._domains.pop(domain, None)
            view._domain_cliques.pop(domain, None)
        for clique_id in before - after:
            view._touching[clique_id] = view._touching[clique_id] - {domain}
        for clique_id in after - before:
            view._touching[clique_id] = view._touching.get(clique_id, frozenset()) | {domain}
        for clique_id in sorted(before | after):
            clique = view._cliques.get(clique_id)
            if clique is not None:
                view._states[clique_id] = view._state_of(clique)
        return view

    def restricted(self, domain: str, limits: NodeLimits, *, gpus_per_pod: int) -> ClusterView:
        """This view as ``domain``'s gang sees it under ``limits`` (``limits.py``): the cliques
        with a node the limits name are derived again; the others are shared. Views advanced
        from it (``with_domain``) keep the limits."""
        view = self._copy()
        view._limits = (domain, limits, gpus_per_pod)
        view._largest = {}
        own = own_pods(self._domains.get(domain, ()))
        owned = {self._node_clique.get(node) for node in own}
        touched = (
            limits.cliques
            if limits.cliques is not None
            else {self._node_clique.get(node) for node in limits.nodes}
        )
        if len(self._limited) > MEMO_LIMIT:
            self._limited.clear()
        for clique_id in sorted(c for c in touched if c is not None):
            base = self._states[clique_id]
            key = (id(base), id(limits), gpus_per_pod)
            hit = self._limited.get(key)
            if clique_id not in owned and hit is not None:
                assert hit[0] is base and hit[1] is limits
                view._states[clique_id] = hit[2]
                continue
            limited = limit_state(base, limits, own=own, gpus_per_pod=gpus_per_pod)
            if clique_id not in owned:
                self._limited[key] = (base, limits, limited)
            view._states[clique_id] = limited
        return view

    def _state_of(self, clique: Clique) -> CliqueState:
        """The clique's state from the view's reservations (and limits, if it has some)."""
        state = build_clique_state(clique, self._reservations_in(clique.id))
        if self._limits is None:
            return state
        domain, limits, gpus_per_pod = self._limits
        own = own_pods(self._domains.get(domain, ()))
        return limit_state(state, limits, own=own, gpus_per_pod=gpus_per_pod)

    def with_clique(self, clique: Clique) -> ClusterView:
        """This view with ``clique`` added or replaced (nodes joined, left, changed health).

        A node moves between cliques in two steps: first the clique it leaves, then the one it
        joins; a node still listed in another clique is refused with ValueError.
        """
        view = self._copy()
        view._node_clique = dict(self._node_clique)
        view._cliques = dict(self._cliques)
        old = view._cliques.get(clique.id)
        if old is not None:
            for node in old.nodes:
                del view._node_clique[node.name]
        _index_nodes(view._node_clique, clique)
        view._cliques[clique.id] = clique
        view._cliques = dict(sorted(view._cliques.items()))
        # Shares count on the clique their node is in now, so which cliques a domain touches
        # may change for any domain with a share on a node that joined or left.
        view._touching = {}
        for domain, held in view._domains.items():
            touched = view._cliques_touched(held)
            view._domain_cliques[domain] = touched
            for clique_id in touched:
                view._touching[clique_id] = view._touching.get(clique_id, frozenset()) | {domain}
        view._states[clique.id] = view._state_of(clique)
        view._states = {clique_id: view._states[clique_id] for clique_id in view._cliques}
        view._index_sizes()
        view._largest = {}
        return view

    def _index_sizes(self) -> None:
        sizes = {gpus for state in self._states.values() for gpus, _ in state.node_sizes}
        self._sizes = tuple(sorted(sizes))
        self._shapes = pod_shapes(self._sizes)

    def _copy(self) -> ClusterView:
        """A copy to change; what only ``with_clique`` changes is shared until it does."""
        view = ClusterView()
        view._cliques = self._cliques
        view._node_clique = self._node_clique
        view._states = dict(self._states)
        view._domains = dict(self._domains)
        view._touching = dict(self._touching)
        view._domain_cliques = dict(self._domain_cliques)
        view._shapes = self._shapes
        view._sizes = self._sizes
        # Sizes of empty cliques depend on nodes only, so the memo holds until with_clique.
        view._largest = self._largest
        view._limits = self._limits
        view._limited = self._limited
        return view

    def _cliques_touched(self, reservations: Iterable[Reservation]) -> frozenset[str]:
        touched: set[str] = set()
        for reservation in reservations:
            touched.add(reservation.clique)
            for share in reservation.shares:
                clique_id = self._node_clique.get(share.node)
                if clique_id is not None:
                    touched.add(clique_id)
        return frozenset(touched)

    def _reservations_in(self, clique_id: str) -> list[Reservation]:
        return [
            reservation
            for domain in self._touching.get(clique_id, frozenset())
            for reservation in self._domains[domain]
        ]


def _index_nodes(node_clique: dict[str, str], clique: Clique) -> None:
    for node in clique.nodes:
        if node.name in node_clique:
            raise ValueError(f"node {node.name} is listed twice (a node is in one clique)")
        node_clique[node.name] = clique.id


def _ordered(domain: str, reservations: list[Reservation]) -> tuple[Reservation, ...]:
    held = tuple(sorted(reservations, key=lambda r: r.slice_index))
    for reservation in held:
        if reservation.domain != domain:
            raise ValueError(f"reservation of {reservation.domain} given for domain {domain}")
    for earlier, later in itertools.pairwise(held):
        if earlier.slice_index == later.slice_index:
            raise ValueError(f"domain {domain} has two reservations for slice {later.slice_index}")
    return held
