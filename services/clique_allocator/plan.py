"""What to do for one domain, decided from its record, its pods and the cluster (pure).

``plan_domain`` is the allocator's reconcile without I/O. From the domain's Placement (the
record), its pods, their ranks, the size of its gang and the engine's view of the cluster it
answers, in a chain of small pure steps (``planning/``):

1. **release** (``planning/release.py``) what the domain no longer needs: seats of pods that are
   gone, slots on nodes that take no new pods, the highest ranks when the gang shrinks, free
   slots beyond what the gang still lacks; then **fail over** (``planning/failover.py``) a
   slice its clique can no longer hold, once its grace is over;
2. **reserve** the rest of the gang: ``planning/grow.py`` says which slice takes the new ranks,
   ``planning/reserve.py`` asks the engine (``placement.place``) for every slice's room at once:
   the whole gang in one clique when it fits one, else in slices; a slice that must hold more
   pods grows in its own clique or not at all;
3. **pin** (``planning/pin.py``) gated pods to free slots by rank; the record names each pod's
   node and rank before the pod is patched, so a pinned pod is never forgotten;
4. **hold** gated pods that got no slot, with the engine's reason (or ``GangComplete`` when the
   gang already has every slot it wants), as condition ``cdo.dev/Placed=False`` on the pod.

A domain being deleted keeps its record while pods still use its claims and loses it (``delete``)
once none does; a domain that is gone loses it at once.

Pods that ask for no GPU, only the domain's channel, are not part of those steps: the steps see
the pods that take GPUs and the record without the others' seats, and
``planning/channelonly.py`` then seats the pods without GPUs in what they made. A pod whose
claims are not all known yet (a claim template not in the cache) is left for the next look.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import msgspec

from services.clique_allocator.gang import (
    GANG_SIZE_UNDECLARED,
    GangSize,
    GpuCount,
    UndeclaredSize,
    UnknownSize,
    gpus_per_pod,
    plugin_gpus,
)
from services.clique_allocator.objects import finished
from services.clique_allocator.placement import ClusterView, NodeLimits
from services.clique_allocator.planning.channelonly import (
    ChannelRoom,
    plan_channel_only,
    without_channel_only,
)
from services.clique_allocator.planning.failover import FailedOver, Waited, fail_over
from services.clique_allocator.planning.grow import plan_growth
from services.clique_allocator.planning.hold import (
    Hold,
    hold_left,
    holds,
    not_placed_notice,
    waited,
)
from services.clique_allocator.planning.notices import Notice, change_notices, deleted
from services.clique_allocator.planning.nvlinkless import plan_without_nvlink, runs_without_nvlink
from services.clique_allocator.planning.outcome import Action, Pin, Plan
from services.clique_allocator.planning.pin import seat_pods
from services.clique_allocator.planning.places import Places
from services.clique_allocator.planning.pods import DomainPods, sort_pods
from services.clique_allocator.planning.release import release
from services.clique_allocator.planning.reserve import Reserved, reserve
from services.clique_allocator.planning.slices import (
    SliceHold,
    holds_of,
    record_of,
    reservations_of,
)
from services.clique_allocator.planning.spread import span_per_slice
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Pod

INVALID_REQUEST = "InvalidRequest"
PLACED = "Placed"


class _Ask(msgspec.Struct, frozen=True, kw_only=True):
    """What the gang asks for: its size and source, GPUs per pod, slice size and spread."""

    pods: int
    source: str
    gpus: int
    slice_size: int | None
    span: int | None
    fits_one_clique: bool
    limits: NodeLimits | None = None
    """Where the pods' own constraints let them go (``eligibility.py``)."""
    clique_room: int = 0
    """The most of its pods one clique takes when empty, where the constraints let them go."""


LimitsOf = Callable[[int], NodeLimits | None]
"""GPUs per pod -> the gang's node limits (None: its pods may go to any usable node)."""
RoomOf = Callable[[], ChannelRoom]
"""What nodes offer pods without GPUs now (worked out only for a domain that has some)."""


def plan_domain(
    *,
    key: str,
    domain: ComputeDomain | None,
    placement: PlacementSpec | None,
    pods: Sequence[Pod],
    gang: GangSize | UnknownSize | UndeclaredSize,
    view: ClusterView,
    ranks: Mapping[str, int] | None = None,
    now: datetime | None = None,
    waited: Waited | None = None,
    nodes_without_nvlink: int = 0,
    gpus_of: Callable[[Pod], int] = plugin_gpus,
    limits: LimitsOf | None = None,
    channel_only: Callable[[Pod], bool] | None = None,
    room: RoomOf | None = None,
) -> Plan:
    """The plan for one domain; see the module docstring. ``pods`` use the domain's claims;
    ``gang`` is the size of the gang of pods that take GPUs (``gang.py``); ``ranks`` are the
    ranks of those that carry an index (``ranks.pod_rank``); ``now`` (whole seconds, UTC)
    stamps failover, which is off without it, and ``waited`` says how long a stuck slice has
    waited (``planning/failover.py``, clock skew); ``nodes_without_nvlink`` counts the GPU nodes
    on no NVLink fabric that take new pods (``planning/nvlinkless.py``); ``gpus_of`` tells the
    GPUs a pod asks for (``nvidia.com/gpu`` only by default; the reconciler adds DRA claims);
    ``limits`` gives the nodes the gang's pods can be scheduled on (every usable node without
    it; ``limits(0)``: the pods without GPUs); ``channel_only`` tells a pod that asks for no
    GPU at all (default: ``gpus_of`` says 0), ``room`` what nodes offer such pods
    (``planning/channelonly.py``; asked only when the domain has some)."""
    live = [pod for pod in pods if not finished(pod)]
    if domain is None or (domain.deleting and not live):
        if placement is None:
            return Plan()
        farewell = (
            ()
            if domain is None
            else (Notice(type="Normal", reason="PlacementDeleted", message=deleted(placement)),)
        )
        return Plan(action="delete", released=True, notices=farewell)
    if domain.deleting:
        return Plan()  # pods still use the domain's claims: hold everything until they end
    asks_none = channel_only or (lambda pod: gpus_of(pod) == 0)
    without = [pod for pod in live if gpus_of(pod) == 0 and asks_none(pod)]
    if not without and (placement is None or not _holds_channel_only(placement)):
        unknown = any(gpus_of(pod) == 0 for pod in live)
        plan = _plan_gpus(
            key=key, domain=domain, placement=placement, pods=pods, gang=gang, view=view,
            ranks=ranks, now=now, waited=waited, nodes_without_nvlink=nodes_without_nvlink,
            gpus_of=gpus_of, limits=limits,
        )  # fmt: skip
        return msgspec.structs.replace(plan, unknown_size=True) if unknown else plan
    return _plan_with_channel_only(
        key=key, domain=domain, placement=placement, pods=pods, without=without, gang=gang,
        view=view, ranks=ranks, now=now, waited=waited, nodes_without_nvlink=nodes_without_nvlink,
        gpus_of=gpus_of, limits=limits, room=room() if room is not None else ChannelRoom(),
    )  # fmt: skip


def _holds_channel_only(placement: PlacementSpec) -> bool:
    return bool(
        placement.channel_only or placement.placed_channel_only or not placement.gpus_per_pod
    )


def _plan_with_channel_only(
    *,
    key: str,
    domain: ComputeDomain,
    placement: PlacementSpec | None,
    pods: Sequence[Pod],
    without: Sequence[Pod],
    gang: GangSize | UnknownSize | UndeclaredSize,
    view: ClusterView,
    ranks: Mapping[str, int] | None,
    now: datetime | None,
    waited: Waited | None,
    nodes_without_nvlink: int,
    gpus_of: Callable[[Pod], int],
    limits: LimitsOf | None,
    room: ChannelRoom,
) -> Plan:
    """The GPU steps on the pods that take GPUs, then the pods without GPUs seated in what they
    made (``planning/channelonly.py``)."""
    gpu_pods = [pod for pod in pods if gpus_of(pod) > 0]
    told = {pod.metadata.name for pod in without}
    # A pod that names no GPU but whose claims are not all known yet: look again soon.
    unknown = any(
        gpus_of(pod) == 0 and pod.metadata.name not in told for pod in pods if not finished(pod)
    )
    gpu_live = {pod.metadata.name: pod.metadata.uid for pod in gpu_pods if not finished(pod)}
    stripped = without_channel_only(placement, gpu_pods=gpu_live)
    if not gpu_live and (stripped is None or not stripped.all_slices):
        gpus = Plan()  # no pod takes GPUs, and the record holds no GPU slice: nothing to do
    else:
        gpus = _plan_gpus(
            key=key, domain=domain, placement=stripped, pods=gpu_pods, gang=gang, view=view,
            ranks=gpu_ranks(ranks or {}, without), now=now, waited=waited,
            nodes_without_nvlink=nodes_without_nvlink, gpus_of=gpus_of, limits=limits,
        )  # fmt: skip
    if gpus.action == "delete":
        return gpus
    base = gpus.record if gpus.record is not None else stripped
    places = Places(view, placement)
    step = plan_channel_only(
        key=key,
        record=base,
        before=placement,
        pods=without,
        gpu_gang=_gpu_gang(gang),
        gpu_wait=next((f"{hold.reason}: {hold.message}" for hold in gpus.holds), ""),
        view=view,
        room=room,
        limits=limits(0) if limits is not None else None,
        slot_of=places.slot,
        nodes_without_nvlink=nodes_without_nvlink,
    )
    record = step.record
    action: Action = "keep" if record == placement or record is None else "write"
    reservations = tuple(reservations_of(key, record)) if action == "write" and record else ()
    return Plan(
        action=action,
        record=record,
        reservations=reservations,
        pins=(*gpus.pins, *step.pins),
        holds=(*gpus.holds, *step.holds),
        notices=(*gpus.notices, *step.notices),
        waiting=gpus.waiting or step.waiting,
        released=gpus.released or step.released,
        unknown_size=gpus.unknown_size or unknown,
        evictions=tuple(sorted({*gpus.evictions, *step.evictions})),
        retry_after_s=gpus.retry_after_s,
    )


def gpu_ranks(ranks: Mapping[str, int], without: Sequence[Pod]) -> dict[str, int]:
    """The ranks of the pods that take GPUs: an index a pod without GPUs carries is no rank (a
    LeaderWorkerSet's leader without GPUs: its workers rank from 0), so every rank above one
    moves down by one."""
    names = {pod.metadata.name for pod in without}
    dropped = sorted(rank for name, rank in ranks.items() if name in names)
    return {
        name: rank - bisect.bisect_left(dropped, rank)
        for name, rank in ranks.items()
        if name not in names
    }


def _gpu_gang(gang: GangSize | UnknownSize | UndeclaredSize) -> int | None:
    """Pods that take GPUs the gang wants: None while unknown; a size cdo cannot read counts
    as some (its pods are held, so pods without GPUs wait with them)."""
    if isinstance(gang, GangSize):
        return gang.pods
    return None if isinstance(gang, UnknownSize) else 1


def _plan_gpus(
    *,
    key: str,
    domain: ComputeDomain,
    placement: PlacementSpec | None,
    pods: Sequence[Pod],
    gang: GangSize | UnknownSize | UndeclaredSize,
    view: ClusterView,
    ranks: Mapping[str, int] | None,
    now: datetime | None,
    waited: Waited | None,
    nodes_without_nvlink: int,
    gpus_of: Callable[[Pod], int],
    limits: LimitsOf | None,
) -> Plan:
    """The plan for the domain's pods that take GPUs (every step of the module docstring)."""
    live = [pod for pod in pods if not finished(pod) and gpus_of(pod) > 0]
    sorted_pods = sort_pods(live, placement)
    if (placement is None or placement.gpus_per_pod < 1) and not sorted_pods.waiting:
        return Plan(pins=sorted_pods.repins)
    if isinstance(gang, UnknownSize):
        return Plan(pins=sorted_pods.repins, unknown_size=True)
    if isinstance(gang, UndeclaredSize):
        return _refuse(sorted_pods, sorted_pods.waiting, gang.message, GANG_SIZE_UNDECLARED)
    ask = _ask(key, domain, placement, sorted_pods, gang, view, gpus_of, limits)
    if isinstance(ask, Plan):
        return ask
    if runs_without_nvlink(placement, clique_room=ask.clique_room, nodes=nodes_without_nvlink):
        return plan_without_nvlink(placement, sorted_pods, gpus_per_pod=ask.gpus, size=ask.pods)
    return _plan(
        key=key,
        domain=domain,
        placement=placement,
        pods=sorted_pods,
        ask=ask,
        view=view,
        ranks=ranks,
        now=now,
        waited=waited,
        gpus_of=gpus_of,
    )


def _refuse(
    pods: DomainPods, waiting: Sequence[Pod], message: str, reason: str = INVALID_REQUEST
) -> Plan:
    return Plan(
        pins=pods.repins,
        holds=holds(waiting, reason, message),
        notices=(Notice(type="Warning", reason=reason, message=message),),
    )


def _ask(
    key: str,
    domain: ComputeDomain,
    placement: PlacementSpec | None,
    pods: DomainPods,
    gang: GangSize,
    view: ClusterView,
    gpus_of: Callable[[Pod], int],
    limits_of: LimitsOf | None,
) -> _Ask | Plan:
    """What the gang asks for, or a plan that refuses its pods (no valid request)."""
    if placement is not None and placement.gpus_per_pod > 0:
        gpus = placement.gpus_per_pod
    else:
        counted = gpus_per_pod(pods.waiting, gpus_of)
        if not isinstance(counted, GpuCount):
            return _refuse(pods, pods.waiting, "no pods" if counted is None else counted.message)
        gpus = counted.gpus
    # The record's slice size once placed in slices; before that the domain's spec.gang.
    if placement is not None and placement.slices:
        slice_size = placement.slice_size
    else:
        slice_size = domain.spec.gang.slice_size if domain.spec.gang is not None else None
    limits = limits_of(gpus) if limits_of is not None else None
    if limits is not None and limits.nodes:
        view = view.restricted(key, limits, gpus_per_pod=gpus)
    largest = view.largest_clique(gpus)
    fits = largest is None or gang.pods <= largest[0]
    span = span_per_slice(domain, gang_pods=gang.pods, slice_size=slice_size, fits_one=fits)
    if isinstance(span, str):
        return _refuse(pods, pods.waiting, span)
    return _Ask(
        pods=gang.pods,
        source=gang.source,
        gpus=gpus,
        slice_size=slice_size,
        span=span,
        fits_one_clique=fits,
        limits=limits,
        clique_room=largest[0] if largest is not None else 0,
    )


def _plan(
    *,
    key: str,
    domain: ComputeDomain,
    placement: PlacementSpec | None,
    pods: DomainPods,
    ask: _Ask,
    view: ClusterView,
    ranks: Mapping[str, int] | None,
    now: datetime | None,
    waited: Waited | None,
    gpus_of: Callable[[Pod], int],
) -> Plan:
    """Release, reserve, pin, hold (the module docstring)."""
    ranks = ranks or {}
    waiting = [pod for pod in pods.waiting if gpus_of(pod) == ask.gpus]
    mismatched = [pod for pod in pods.waiting if gpus_of(pod) != ask.gpus]
    held = list(
        holds(
            mismatched,
            INVALID_REQUEST,
            f"the domain's pods take {ask.gpus} GPUs each; this pod asks for a different number",
        )
    )
    places = Places(view, placement)
    before = holds_of(placement) if placement is not None else []
    failed_over = _release(
        key=key, domain=domain, before=before, pods=pods, ask=ask, places=places, view=view,
        ranks=ranks, now=now, waited=waited,
    )  # fmt: skip
    released = failed_over.released
    growth = plan_growth(
        released,
        gang_pods=ask.pods,
        slice_size=ask.slice_size,
        fits_one_clique=ask.fits_one_clique,
    )
    reserved = reserve(
        view,
        key=key,
        released=released,
        growth=growth,
        gpus_per_pod=ask.gpus,
        slice_size=ask.slice_size,
        span=ask.span,
        limits=ask.limits,
    )
    if not reserved.holds:
        assert reserved.not_placed is not None  # a gang with waiting pods and no record
        held.extend(holds(pods.waiting, reserved.not_placed.reason, reserved.not_placed.message))
        notices = not_placed_notice(reserved.not_placed, held)
        return Plan(pins=pods.repins, holds=tuple(held), notices=notices, waiting=True)
    return _seat(
        placement=placement, before=before, pods=pods, waiting=waiting, held=held, ask=ask,
        places=places, reserved=reserved, failed_over=failed_over, ranks=ranks,
    )  # fmt: skip


def _release(
    *,
    key: str,
    domain: ComputeDomain,
    before: Sequence[SliceHold],
    pods: DomainPods,
    ask: _Ask,
    places: Places,
    view: ClusterView,
    ranks: Mapping[str, int],
    now: datetime | None,
    waited: Waited | None,
) -> FailedOver:
    """What the record still holds once gone pods and lost nodes are let go, and once slices
    stuck past their grace fail over (only with a clock to judge the grace by)."""
    released = release(
        before,
        pods=pods.by_name,
        ranks=ranks,
        usable=places.usable,
        node_slot=places.slot,
        gang_pods=ask.pods,
    )
    if now is None:
        return FailedOver(released=released)
    return fail_over(
        released,
        view,
        key=key,
        gpus_per_pod=ask.gpus,
        policy=domain.spec.failover,
        healthy=places.healthy,
        now=now,
        waited=waited,
    )


def _seat(
    *,
    placement: PlacementSpec | None,
    before: Sequence[SliceHold],
    pods: DomainPods,
    waiting: Sequence[Pod],
    held: list[Hold],
    ask: _Ask,
    places: Places,
    reserved: Reserved,
    failed_over: FailedOver,
    ranks: Mapping[str, int],
) -> Plan:
    """Seat the waiting pods in what is reserved, and the record and plan that follow."""
    seated = seat_pods(reserved.holds, waiting=waiting, ranks=ranks, node_slot=places.slot)
    held.extend(hold_left(seated.left, reserved.not_placed, gang_pods=ask.pods, source=ask.source))
    # Pods of a slice that failed over are evicted until they are gone (the list is in the
    # record, so a refused eviction or a restart does not forget them).
    evicting = [
        ref
        for ref in {*(placement.evicting if placement else ()), *failed_over.evictions}
        if ref.name in pods.by_name and pods.by_name[ref.name].metadata.uid in ("", ref.uid)
    ]
    record = record_of(
        seated.holds,
        gpus_per_pod=ask.gpus,
        size=ask.pods,
        slice_size=ask.slice_size,
        node_slots=places.slots_of(seated.holds),
        evicting=evicting,
    )
    pins = tuple(
        Pin(pod=name, node=seat.node, waited=waited(pods.by_name[name]))
        for name, seat in sorted(seated.seated.items())
    )
    return Plan(
        action="keep" if record == placement else "write",
        record=record,
        reservations=reserved.reservations,
        pins=(*pods.repins, *pins),
        holds=tuple(held),
        notices=(
            *failed_over.notices,
            *not_placed_notice(reserved.not_placed, held),
            *change_notices(placement, record),
        ),
        waiting=bool(seated.left) and reserved.not_placed is not None,
        released=_gave_back(before, seated.holds),
        evictions=tuple(
            sorted(
                ref.name
                for ref in evicting
                if pods.by_name[ref.name].metadata.deletion_timestamp is None
            )
        ),
        retry_after_s=failed_over.retry_after_s,
    )


def _gave_back(before: Sequence[SliceHold], after: Sequence[SliceHold]) -> bool:
    """Whether any slice holds fewer slots on a node than before (or is gone)."""
    now = {hold.index: hold for hold in after}
    for earlier in before:
        later = now.get(earlier.index)
        for node, count in earlier.slots.items():
            if later is None or later.slots.get(node, 0) < count:
                return True
    return False
