"""The clique allocator's placement engine: pure decisions, no I/O.

Build a :class:`ClusterView` from the cliques (with their nodes) and the reservations already
made, then ask :func:`place` for a :class:`GangRequest`; it returns :class:`Placed` (the
domain's new pods per slice, node by node, its IMEX channel, its updated reservations) or a
:class:`NotPlaced` with a :class:`Reason` and a message. Advance the view with
``view.with_domain(placement.domain, placement.reservations)``; shrink with :func:`release`.

Modules, one concept each: ``model`` (inputs), ``decision`` (outputs), ``state`` (a clique's
derived state), ``view`` (the whole cluster), ``layout`` (checking a request, fixed slice sizes),
``fill`` and ``span`` (pods onto nodes), ``limits`` (a clique as one gang's own constraints
leave it), ``score`` (choosing a clique), ``cut`` (the fewest
slices for a gang larger than a clique), ``engine`` (the decision), ``release`` (shrinking),
``messages`` (the human-readable reasons).
See docs/placement.md for the policy and its tie-breaks.
"""

from services.clique_allocator.placement.decision import (
    Decision,
    NotPlaced,
    Placed,
    Reason,
    SlicePlacement,
)
from services.clique_allocator.placement.engine import place
from services.clique_allocator.placement.model import (
    MAX_CHANNELS,
    Clique,
    GangRequest,
    Node,
    NodeLimits,
    NodeShare,
    Reservation,
    SliceTarget,
)
from services.clique_allocator.placement.release import release
from services.clique_allocator.placement.state import CliqueState, NodeState
from services.clique_allocator.placement.view import ClusterView

__all__ = [
    "MAX_CHANNELS",
    "Clique",
    "CliqueState",
    "ClusterView",
    "Decision",
    "GangRequest",
    "Node",
    "NodeLimits",
    "NodeShare",
    "NodeState",
    "NotPlaced",
    "Placed",
    "Reason",
    "Reservation",
    "SlicePlacement",
    "SliceTarget",
    "place",
    "release",
]
