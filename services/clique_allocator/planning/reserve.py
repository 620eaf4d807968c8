"""Step 2b of a plan: reserve what the slices lack through the engine, all or nothing (pure).

The engine gets the domain's slices as reservations (after release), the pods each must hold,
and the new ranks; its answer gives every slice's node shares. New slices take the ranks after
the last one, in order; a last slice that took new ranks through ``extend_last`` covers them.
When the engine says no, nothing of the growth is kept: the slices stay as release left them.
"""

from __future__ import annotations

import msgspec

from services.clique_allocator.placement import (
    ClusterView,
    GangRequest,
    NodeLimits,
    NotPlaced,
    Placed,
    Reservation,
    SliceTarget,
    place,
)
from services.clique_allocator.planning.grow import Growth
from services.clique_allocator.planning.release import Released
from services.clique_allocator.planning.slices import SliceHold, reservation_of


class Reserved(msgspec.Struct, frozen=True, kw_only=True):
    holds: tuple[SliceHold, ...]
    reservations: tuple[Reservation, ...]
    not_placed: NotPlaced | None = None


def reserve(
    view: ClusterView,
    *,
    key: str,
    released: Released,
    growth: Growth,
    gpus_per_pod: int,
    slice_size: int | None,
    span: int | None,
    limits: NodeLimits | None = None,
) -> Reserved:
    """Reserve the growth (see the module docstring)."""
    current = {hold.index: hold for hold in growth.holds}
    held = tuple(reservation_of(key, h, gpus_per_pod=gpus_per_pod) for h in growth.holds)
    short = any(t > current[i].slot_count for i, t in growth.targets.items() if i in current)
    if not short and growth.new_pods == 0:
        return Reserved(holds=growth.holds, reservations=held)
    request = GangRequest(
        domain=key,
        gpus_per_pod=gpus_per_pod,
        targets=tuple(
            SliceTarget(slice_index=i, pods=t) for i, t in sorted(growth.targets.items())
        ),
        new_pods=growth.new_pods,
        slice_pods=slice_size,
        extend_last=growth.extend_last,
        span=span,
        limits=limits,
    )
    decision = place(view.with_domain(key, held), request)
    if isinstance(decision, NotPlaced):
        kept = tuple(reservation_of(key, h, gpus_per_pod=gpus_per_pod) for h in released.holds)
        return Reserved(holds=released.holds, reservations=kept, not_placed=decision)
    return Reserved(holds=_apply(decision, current, growth), reservations=decision.reservations)


def _apply(
    decision: Placed, current: dict[int, SliceHold], growth: Growth
) -> tuple[SliceHold, ...]:
    holds: list[SliceHold] = []
    end = max((hold.end_rank for hold in current.values()), default=0)
    last = max(current, default=None)
    for reservation in decision.reservations:
        slots = {share.node: share.pods for share in reservation.shares}
        hold = current.get(reservation.slice_index)
        if hold is None:
            hold = SliceHold(
                index=reservation.slice_index,
                clique=reservation.clique,
                channel=reservation.channel,
                first_rank=end,
                size=reservation.pods,
            )
            end += reservation.pods
        elif growth.extend_last and reservation.slice_index == last:
            took = reservation.pods - growth.targets.get(hold.index, 0)
            hold = msgspec.structs.replace(hold, size=hold.size + took)
            end += took
        holds.append(msgspec.structs.replace(hold, slots=slots))
    return tuple(holds)
