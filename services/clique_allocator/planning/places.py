"""The node facts a plan's steps read from the engine's view: whether a node takes new pods in
a clique, and its tray slot (the record's slot for a node no longer in any clique)."""

from __future__ import annotations

from collections.abc import Sequence

from services.clique_allocator.placement import ClusterView, NodeState
from services.clique_allocator.planning.slices import SliceHold
from shared.crds.placement import PlacementSpec


class Places:
    def __init__(self, view: ClusterView, placement: PlacementSpec | None) -> None:
        self._view = view
        self._recorded = {
            member.node: member.slot
            for piece in (placement.all_slices if placement is not None else ())
            for member in piece.members
        }

    def _state(self, clique: str | None, node: str) -> NodeState | None:
        state = self._view.clique(clique) if clique is not None else None
        return next((n for n in state.nodes if n.name == node), None) if state else None

    def usable(self, clique: str, node: str) -> bool:
        """In the clique now and takes new pods, with room for what is reserved on it (a node
        that lost a GPU may no longer hold a free slot the domain kept there)."""
        found = self._state(clique, node)
        return found is not None and found.usable and not found.overcommitted

    def healthy(self, clique: str, node: str) -> bool:
        """In the clique now, Ready and without a fault (cordoned or not)."""
        found = self._state(clique, node)
        return found is not None and found.healthy

    def slot(self, node: str) -> int:
        found = self._state(self._view.clique_of(node), node)
        return found.slot if found is not None else self._recorded.get(node, 0)

    def slots_of(self, holds: Sequence[SliceHold]) -> dict[str, int]:
        return {node: self.slot(node) for hold in holds for node in hold.slots}
