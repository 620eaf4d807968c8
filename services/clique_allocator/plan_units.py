"""The plan of a domain placed in gang units: each unit planned as a gang of its own (pure).

``units.py`` says which units a domain has and how big each is. Every unit is planned by
``plan_domain`` under its own engine key (``<namespace>/<domain>#<unit>``), so it gets its own
slices and its own channel in each clique, on the record ``planning/unitrecords.py`` cuts out
of the domain's Placement. The units are planned one after another, in name order, each on the
view the ones before it left; their plans are then joined into the domain's one plan and one
Placement. A unit that is scaled away (size 0) and holds no pod any more leaves the Placement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import msgspec

from services.clique_allocator.gang import GangSize, less_channel_only
from services.clique_allocator.objects import finished
from services.clique_allocator.placement import ClusterView, Reservation
from services.clique_allocator.plan import INVALID_REQUEST, LimitsOf, RoomOf, plan_domain
from services.clique_allocator.planning.failover import Waited
from services.clique_allocator.planning.hold import holds
from services.clique_allocator.planning.notices import Notice
from services.clique_allocator.planning.outcome import Action, Plan
from services.clique_allocator.planning.slices import reservations_of
from services.clique_allocator.planning.unitrecords import merge_units, unit_specs
from services.clique_allocator.units import UnitAsk, unit_key
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Pod


class _UnitPlan(msgspec.Struct, frozen=True, kw_only=True):
    plan: Plan
    record: PlacementSpec | None
    reservations: tuple[Reservation, ...]


def plan_units(
    *,
    key: str,
    domain: ComputeDomain,
    placement: PlacementSpec | None,
    units: Mapping[str, UnitAsk],
    unlabelled: Sequence[Pod] = (),
    unknown: bool = False,
    view: ClusterView,
    now: datetime | None = None,
    waited: Waited | None = None,
    nodes_without_nvlink: int = 0,
    gpus_of: Callable[[Pod], int],
    limits: Callable[[Sequence[Pod]], LimitsOf | None] | None = None,
    channel_only: Callable[[Pod], bool] | None = None,
    room: RoomOf | None = None,
) -> Plan:
    """The plan for a live domain in units; ``units`` holds every unit with live pods or a
    record, ``unlabelled`` the pods refused for lacking ``spec.gang.unitLabel``'s label;
    ``unknown``: some pod's unit cannot be told yet (look again soon). A unit's size counts
    its pods without GPUs (``channel_only``) too: the gang each unit reserves GPU slots for is
    its size less its live pods without GPUs (``planning/channelonly.py``)."""
    asks_none = channel_only or (lambda pod: gpus_of(pod) == 0)
    recorded = unit_specs(placement) if placement is not None else {}
    planned: dict[str, _UnitPlan] = {}
    for unit in sorted(units):
        ask = units[unit]
        part = recorded.get(unit)
        engine_key = unit_key(key, unit)
        if part is None and isinstance(ask.gang, GangSize) and ask.gang.pods == 0:
            # A unit scaled away before it was placed: its pods (being deleted) stay gated.
            planned[unit] = _UnitPlan(plan=Plan(), record=None, reservations=())
            continue
        if part is None and placement is not None:
            # A new unit takes the GPUs per pod the domain's record already says.
            part = PlacementSpec(gpus_per_pod=placement.gpus_per_pod, size=0)
        without = sum(
            1 for pod in ask.pods if not finished(pod) and gpus_of(pod) == 0 and asks_none(pod)
        )
        gang = less_channel_only(ask.gang, without) if isinstance(ask.gang, GangSize) else ask.gang
        plan = plan_domain(
            key=engine_key,
            domain=domain,
            placement=part,
            pods=ask.pods,
            gang=gang,
            view=view,
            ranks=ask.ranks,
            now=now,
            waited=waited,
            nodes_without_nvlink=nodes_without_nvlink,
            gpus_of=gpus_of,
            limits=limits(ask.pods) if limits is not None else None,
            channel_only=channel_only,
            room=room,
        )
        record = plan.record if plan.record is not None else recorded.get(unit)
        held = (
            plan.reservations
            if plan.record is not None
            else tuple(reservations_of(engine_key, record) if record is not None else ())
        )
        if _scaled_away(ask, record):
            record, held = None, ()
        view = view.with_domain(engine_key, held)
        planned[unit] = _UnitPlan(plan=plan, record=record, reservations=held)
    joined = _join(placement, planned, unlabelled)
    return msgspec.structs.replace(joined, unknown_size=joined.unknown_size or unknown)


def _scaled_away(ask: UnitAsk, record: PlacementSpec | None) -> bool:
    """A unit of size 0 whose record seats no pod and holds no slot any more."""
    return (
        isinstance(ask.gang, GangSize)
        and ask.gang.pods == 0
        and (
            record is None
            or (
                record.placed_pods == 0
                and record.reserved_pods == 0
                and record.placed_channel_only == 0
            )
        )
    )


def _join(
    placement: PlacementSpec | None, planned: Mapping[str, _UnitPlan], unlabelled: Sequence[Pod]
) -> Plan:
    """One plan and one Placement from the units' plans."""
    plans = [found.plan for found in planned.values()]
    records = {unit: found.record for unit, found in planned.items() if found.record is not None}
    refused = holds(
        unlabelled,
        INVALID_REQUEST,
        "the pod lacks the label spec.gang.unitLabel names, so it belongs to no gang unit",
    )
    gpus = placement.gpus_per_pod if placement is not None else None
    # A unit of pods without GPUs records 0: the units that take GPUs say how many.
    gpus = gpus or max((record.gpus_per_pod for record in records.values()), default=None)
    record = merge_units(placement, records, gpus_per_pod=gpus) if gpus is not None else None
    if record is not None and not record.slices and placement is None:
        record = None
    action: Action = "keep" if record == placement or record is None else "write"
    retries = [plan.retry_after_s for plan in plans if plan.retry_after_s is not None]
    return Plan(
        action=action,
        record=record if action == "write" else None,
        reservations=tuple(r for found in planned.values() for r in found.reservations),
        pins=tuple(pin for plan in plans for pin in plan.pins),
        holds=(*(hold for plan in plans for hold in plan.holds), *refused),
        notices=_notices(plans, refused_any=bool(refused)),
        waiting=any(plan.waiting for plan in plans),
        released=any(plan.released for plan in plans) or _dropped(placement, record),
        unknown_size=any(plan.unknown_size for plan in plans),
        evictions=tuple(sorted({name for plan in plans for name in plan.evictions})),
        retry_after_s=min(retries) if retries else None,
    )


def _notices(plans: Sequence[Plan], *, refused_any: bool) -> tuple[Notice, ...]:
    """The units' notices, each said once."""
    said = dict.fromkeys(notice for plan in plans for notice in plan.notices)
    if refused_any:
        said[
            Notice(
                type="Warning",
                reason=INVALID_REQUEST,
                message="pods without the label spec.gang.unitLabel names are not placed",
            )
        ] = None
    return tuple(said)


def _dropped(before: PlacementSpec | None, after: PlacementSpec | None) -> bool:
    """Whether a whole unit left the Placement (its GPUs are free for others)."""
    if before is None:
        return False
    left = {piece.unit for piece in (after.slices if after is not None else ())}
    return any(piece.unit not in left for piece in before.all_slices)
