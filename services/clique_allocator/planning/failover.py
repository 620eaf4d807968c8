"""Step 1b of a plan: failover of a slice its clique can no longer hold (pure).

A slice is **stuck** when it cannot be made whole in its clique now: its clique is gone (the
fabric lost, its nodes unlabelled), or the pods it lacks plus the pods it has on nodes that are
unhealthy (NotReady, faulted) or no longer in the clique exceed the room the clique has for
pods of its size on its healthy nodes. A node that is only cordoned is not unhealthy, and its
free GPUs count as room: maintenance never moves a slice, not even when a drained member's
replacement finds no other node of a full clique (it waits there until the node is uncordoned
or room appears).

The record keeps, per slice, since when it is stuck (``waitingSince``); the time is cleared
once the slice is whole again or could be. With ``spec.failover.policy: Move`` (the default), a
slice stuck for ``graceSeconds`` moves: the engine places it again, whole and under the same
index and ranks, in the best-scoring clique other than its own; its old reservation goes, and
the pods still seated in it are evicted (through the Eviction API, so PodDisruptionBudgets
hold) for their workload to recreate, after which they are seated in the new slice by rank.
When no other clique has room the slice keeps waiting and is tried again. ``policy: Wait``
keeps the slice where it is.

**Clock skew.** ``waitingSince`` is stamped by the replica that first saw the slice stuck; a
replica that leads later (another node, another clock) must not read it against its own clock.
How long a slice has waited is therefore asked of ``waited`` (key, slice index, the stamp), which
the allocator answers with how long it has seen that wait on its own monotonic clock
(shared/sightings.py): the grace is never shorter than ``graceSeconds``, whatever the skew; a
new leader counts it again from when it takes over, so a leader change can lengthen it by up to
the grace. Without ``waited`` (tests), the stamp is read against ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import msgspec

from services.clique_allocator.placement import (
    CliqueState,
    ClusterView,
    GangRequest,
    NotPlaced,
    Reservation,
    SliceTarget,
    place,
)
from services.clique_allocator.planning.notices import Notice
from services.clique_allocator.planning.release import Released
from services.clique_allocator.planning.slices import SliceHold, reservation_of
from shared.crds.computedomain import FailoverSpec
from shared.crds.placement import PodRef

NodeHealth = Callable[[str, str], bool]
"""(clique, node) -> whether the node is in that clique now and healthy."""

Waited = Callable[[str, int, datetime], float]
"""(domain key, slice index, waitingSince) -> seconds the slice has waited, on one clock."""


class Stuck(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    why: str


class FailedOver(msgspec.Struct, frozen=True, kw_only=True):
    released: Released
    evictions: tuple[PodRef, ...] = ()
    """Pods of moved slices to evict."""
    notices: tuple[Notice, ...] = ()
    retry_after_s: float | None = None
    """When the next stuck slice's grace ends."""


def stuck_slices(
    released: Released,
    view: ClusterView,
    *,
    key: str,
    gpus_per_pod: int,
    healthy: NodeHealth,
) -> list[Stuck]:
    """The slices that cannot be made whole in their clique now (see the module docstring)."""
    found = []
    after_release: ClusterView | None = None
    for hold in released.holds:
        state = view.clique(hold.clique)
        if state is None:
            found.append(Stuck(index=hold.index, why=f"its clique {hold.clique} is gone"))
            continue
        broken = sum(1 for s in hold.seats.values() if not healthy(hold.clique, s.node))
        lacking = max(0, released.targets.get(hold.index, 0) - hold.slot_count) + broken
        room = state.capacity(gpus_per_pod)
        if lacking > room:
            # Only now the dearer look: what the release let go counts as free, and so do
            # cordoned nodes.
            if after_release is None:
                held = [reservation_of(key, h, gpus_per_pod=gpus_per_pod) for h in released.holds]
                after_release = view.with_domain(key, held)
            released_state = after_release.clique(hold.clique)
            if released_state is not None:
                room = max(room, healthy_room(released_state, gpus_per_pod))
        if lacking > room:
            found.append(
                Stuck(
                    index=hold.index,
                    why=f"it lacks {lacking} pods in clique {hold.clique}, which has room "
                    f"for {room}",
                )
            )
    return found


def healthy_room(state: CliqueState, gpus_per_pod: int) -> int:
    """Pods of ``gpus_per_pod`` GPUs the clique's healthy nodes have room for, cordoned ones
    included (a cordon ends; a fault may not)."""
    return sum(
        node.free // gpus_per_pod
        for node in state.nodes
        if node.healthy and not node.overcommitted and node.gpus % gpus_per_pod == 0
    )


def fail_over(
    released: Released,
    view: ClusterView,
    *,
    key: str,
    gpus_per_pod: int,
    policy: FailoverSpec,
    healthy: NodeHealth,
    now: datetime,
    waited: Waited | None = None,
) -> FailedOver:
    """Mark stuck slices and move those whose grace is over (see the module docstring)."""
    stuck = {
        s.index: s
        for s in stuck_slices(released, view, key=key, gpus_per_pod=gpus_per_pod, healthy=healthy)
    }
    holds = [_waiting(hold, now if hold.index in stuck else None) for hold in released.holds]
    marked = Released(holds=tuple(holds), targets=released.targets)
    notices = [_pending(h, stuck[h.index], policy) for h in holds if _newly(h, released, stuck)]
    if policy.policy != "Move":
        return FailedOver(released=marked, notices=tuple(notices))
    elapsed = {
        h.index: _elapsed(h, now) if waited is None or h.waiting_since is None
        else waited(key, h.index, h.waiting_since)
        for h in holds
        if h.index in stuck
    }  # fmt: skip
    due = [h for h in holds if h.index in stuck and elapsed[h.index] >= policy.grace_seconds]
    waits = [policy.grace_seconds - elapsed[h.index] for h in holds if h.index in stuck]
    retry = min((w for w in waits if w > 0), default=None)
    if not due:
        return FailedOver(released=marked, notices=tuple(notices), retry_after_s=retry)
    return _move(marked, due, view, key=key, gpus_per_pod=gpus_per_pod, now=now,
                 notices=notices, stuck=stuck, retry=retry)  # fmt: skip


def _move(
    marked: Released,
    due: Sequence[SliceHold],
    view: ClusterView,
    *,
    key: str,
    gpus_per_pod: int,
    now: datetime,
    notices: list[Notice],
    stuck: Mapping[int, Stuck],
    retry: float | None,
) -> FailedOver:
    held = [reservation_of(key, h, gpus_per_pod=gpus_per_pod) for h in marked.holds]
    request = GangRequest(
        domain=key,
        gpus_per_pod=gpus_per_pod,
        moves=tuple(SliceTarget(slice_index=h.index, pods=h.size) for h in due),
    )
    decision = place(view.with_domain(key, held), request)
    if isinstance(decision, NotPlaced):
        blocked = Notice(
            type="Warning",
            reason="FailoverBlocked",
            message=f"cannot fail over: {decision.message}",
        )
        return FailedOver(released=marked, notices=(*notices, blocked), retry_after_s=retry)
    by_index: dict[int, Reservation] = {r.slice_index: r for r in decision.reservations}
    moving = {h.index for h in due}
    holds = tuple(
        _moved(h, by_index[h.index], now) if h.index in moving else h for h in marked.holds
    )
    evictions = tuple(
        sorted(
            (PodRef(name=name, uid=seat.uid) for h in due for name, seat in h.seats.items()),
            key=lambda ref: ref.name,
        )
    )
    done = [
        Notice(
            type="Normal",
            reason="FailedOver",
            message=f"slice {h.index} moved from clique {h.clique} to clique "
            f"{by_index[h.index].clique} (channel {by_index[h.index].channel}): "
            f"{stuck[h.index].why}; evicting its {len(h.seats)} remaining pods",
        )
        for h in due
    ]
    targets = {**marked.targets, **{h.index: h.size for h in due}}
    return FailedOver(
        released=Released(holds=holds, targets=targets),
        evictions=evictions,
        notices=(*notices, *done),
        retry_after_s=retry,
    )


def _waiting(hold: SliceHold, since: datetime | None) -> SliceHold:
    if since is None:
        return msgspec.structs.replace(hold, waiting_since=None)
    return msgspec.structs.replace(hold, waiting_since=hold.waiting_since or since)


def _newly(hold: SliceHold, before: Released, stuck: Mapping[int, Stuck]) -> bool:
    earlier = next((h for h in before.holds if h.index == hold.index), None)
    return hold.index in stuck and (earlier is None or earlier.waiting_since is None)


def _elapsed(hold: SliceHold, now: datetime) -> float:
    return 0.0 if hold.waiting_since is None else (now - hold.waiting_since).total_seconds()


def _pending(hold: SliceHold, stuck: Stuck, policy: FailoverSpec) -> Notice:
    then = (
        f"it moves to another clique after {policy.grace_seconds} s unless it recovers"
        if policy.policy == "Move"
        else "it waits for its clique (spec.failover.policy Wait)"
    )
    return Notice(
        type="Warning",
        reason="SliceStuck",
        message=f"slice {hold.index} cannot be made whole in clique {hold.clique}: "
        f"{stuck.why}; {then}",
    )


def _moved(hold: SliceHold, reservation: Reservation, now: datetime) -> SliceHold:
    return msgspec.structs.replace(
        hold,
        clique=reservation.clique,
        channel=reservation.channel,
        slots={share.node: share.pods for share in reservation.shares},
        seats={},
        waiting_since=None,
        moved_from=hold.clique,
        moved_at=now,
    )
