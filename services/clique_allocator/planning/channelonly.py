"""Pods that ask for no GPU, only their domain's channel: where each one is seated (pure).

NVIDIA's own IMEX channel check is such a pod (one claim, the domain's channel, and no GPU); so
are a job's coordinator or checkpoint helper beside its GPU pods. Such a pod takes no GPU, so it
is no part of the gang's all-or-nothing reservation of GPU slots and holds no rank (an index it
carries is left out of the GPU pods' ranks, ``plan.gpu_ranks``); it needs the
domain's channel, so it runs in a clique of the domain, on a node with a free channel attachment
device (each pod with a channel takes one, ``attachments.py``).

- **Where.** In a slice of the domain, the lowest index first, so it gets the channel of that
  slice's clique. Within the slice's clique, a node the slice already uses (its pods with GPUs,
  or its pods without) comes before any other, so such pods add no node to the domain where
  they can and pack together; then the node with the most **room**: its
  free attachment devices, and what its CPU, memory and pod count leave for the pod
  (``eligibility.py`` with no GPU, the pod's own constraints included); then the lowest tray
  slot, then the name. A node whose ResourceSlice the allocator has not seen comes after those
  it has, and counts no attachment limit. A node the pod's constraints rule out, that takes no
  new pods, or that has no room, takes none.
- **A domain of such pods only** (no pod of it takes GPUs and its gang asks for none): the pods
  choose a clique: of the cliques with a free channel for the domain, the one whose nodes offer
  the most room, then the lowest clique id. The record then holds one slice of no ranks in it
  (``size`` 0, ``gpusPerPod`` 0) with the domain's channel there; like any domain's first slice
  it keeps its clique and channel while the domain lives. Pods that take GPUs and come later
  grow that slice, in that clique.
- **A domain whose pods that take GPUs are not placed yet**: its pods without GPUs wait
  (``WaitingForGpuPods``) and join the clique the gang is placed in.
- **No room**: a pod no node can take waits (``NoChannelAvailable``); the message names the
  cliques looked at and why their nodes cannot take it, and the domain is tried again when
  capacity frees.
- **Release.** A seat goes when its pod ends or is gone (a pod recreated under its name is
  another pod). A seat whose slice left the record or moved to another clique (failover) goes
  too, and its pod, which runs on a channel the domain gave up there, is evicted like the
  slice's own pods (``spec.evicting``); its workload recreates it in the new clique.
- A domain that runs without IMEX releases them to the scheduler, like its other pods.

Seats live in the slices' members (``channelOnlyPods``; a node holding only such pods is a
member with no GPUs) and ``spec.channelOnly`` counts the domain's live pods without GPUs,
seated or waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

import msgspec

from services.clique_allocator.eligibility import CHANNEL_ONLY_MOST
from services.clique_allocator.objects import gated
from services.clique_allocator.placement import MAX_CHANNELS, ClusterView, NodeLimits
from services.clique_allocator.placement.messages import plural
from services.clique_allocator.planning.hold import Hold, holds, waited
from services.clique_allocator.planning.notices import Notice
from services.clique_allocator.planning.nvlinkless import (
    WITHOUT_NVLINK,
    WITHOUT_NVLINK_MESSAGE,
    record_without_nvlink,
)
from services.clique_allocator.planning.outcome import Pin
from shared.crds.placement import PlacementSlice, PlacementSpec, PodRef, SliceMember
from shared.kube.models import Pod

WAITING_FOR_GPU_PODS = "WaitingForGpuPods"
NO_CHANNEL_AVAILABLE = "NoChannelAvailable"
_EPOCH = datetime.min.replace(tzinfo=UTC)


class ChannelSeat(msgspec.Struct, frozen=True, kw_only=True):
    """A pod without GPUs seated in a slice, on a node."""

    slice_index: int
    clique: str
    node: str
    uid: str


class ChannelRoom(msgspec.Struct, frozen=True, kw_only=True):
    """What nodes offer a pod without GPUs, before this plan: per node whose ResourceSlice is
    known, its attachment devices nobody holds (``free``); per node, the domain's pods its
    record holds there (``own``: slots and seats, which its ``limits`` caps count in)."""

    free: Mapping[str, int] = msgspec.field(default_factory=dict)
    own: Mapping[str, int] = msgspec.field(default_factory=dict)


class ChannelOnlyPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What the plan does with the domain's pods without GPUs."""

    record: PlacementSpec | None
    pins: tuple[Pin, ...] = ()
    holds: tuple[Hold, ...] = ()
    notices: tuple[Notice, ...] = ()
    waiting: bool = False
    """Some pod waits for room: try again when capacity frees."""
    released: bool = False
    """A seat went: its attachment device is free for others."""
    evictions: tuple[str, ...] = ()


def channel_seats(spec: PlacementSpec | None) -> dict[str, ChannelSeat]:
    """The record's seats of pods without GPUs, by pod name."""
    if spec is None:
        return {}
    return {
        ref.name: ChannelSeat(
            slice_index=piece.index, clique=piece.clique, node=member.node, uid=ref.uid
        )
        for piece in spec.all_slices
        for member in piece.members
        for ref in member.channel_only_pods
    }


def without_channel_only(
    spec: PlacementSpec | None, *, gpu_pods: Mapping[str, str]
) -> PlacementSpec | None:
    """The record as the GPU steps of the plan see it: no seats without GPUs, no member that
    holds only such seats, no count of them, and only the evictions of ``gpu_pods`` (the live
    pods that take GPUs: uid by name)."""
    if spec is None:
        return None
    slices = tuple(
        msgspec.structs.replace(
            piece,
            members=tuple(
                msgspec.structs.replace(member, channel_only_pods=())
                for member in piece.members
                if member.gpus or member.pods
            ),
        )
        for piece in spec.slices
    )
    evicting = tuple(ref for ref in spec.evicting if gpu_pods.get(ref.name) == ref.uid)
    return msgspec.structs.replace(spec, slices=slices, channel_only=0, evicting=evicting)


class _Seating:
    """Nodes' room as pods are seated one after another."""

    def __init__(
        self,
        room: ChannelRoom,
        limits: NodeLimits | None,
        *,
        added: Mapping[str, int],
    ) -> None:
        self._room = room
        self._limits = limits
        self._added = dict(added)

    def room(self, node: str) -> int:
        """How many more pods without GPUs the node takes."""
        most = CHANNEL_ONLY_MOST
        taken = self._added.get(node, 0)
        free = self._room.free.get(node)
        if free is not None:
            most = min(most, free - taken)
        if self._limits is not None and node in self._limits.most_pods:
            most = min(most, self._limits.most_pods[node] - self._room.own.get(node, 0) - taken)
        return max(0, most)

    def excluded(self, node: str) -> bool:
        return self._limits is not None and node in self._limits.excluded

    def known(self, node: str) -> bool:
        return node in self._room.free

    def take(self, node: str) -> None:
        self._added[node] = self._added.get(node, 0) + 1

    def best_node(
        self, view: ClusterView, clique: str, members: frozenset[str]
    ) -> tuple[str, int] | None:
        """The node of ``clique`` the next pod goes to, with its slot (module docstring)."""
        state = view.clique(clique)
        if state is None:
            return None
        found = [
            (node.name not in members, not self.known(node.name), -room, node.slot, node.name)
            for node in state.nodes
            if node.usable and not self.excluded(node.name) and (room := self.room(node.name)) > 0
        ]
        if not found:
            return None
        best = min(found)
        return best[4], best[3]

    def clique_room(self, view: ClusterView, clique: str, wanted: int) -> int:
        """Pods without GPUs the clique takes, up to ``wanted`` per node."""
        state = view.clique(clique)
        if state is None:
            return 0
        return sum(
            min(self.room(node.name), wanted)
            for node in state.nodes
            if node.usable and not self.excluded(node.name)
        )

    def why_not(self, view: ClusterView, clique: str) -> str:
        """Why no node of ``clique`` takes a pod: its nodes, counted by reason."""
        state = view.clique(clique)
        if state is None:
            return f"clique {clique} is no longer in the cluster"
        counts: dict[str, int] = {}
        for node in state.nodes:
            if not node.usable:
                reason = "take{s} no new pods"
            elif self.excluded(node.name):
                reason = "are ruled out by the pod's constraints"
            elif (
                self.known(node.name)
                and self._room.free[node.name] - self._added.get(node.name, 0) <= 0
            ):
                reason = "ha{ve} no free IMEX channel attachment device"
            else:
                reason = "lack{s} the CPU, memory or pod room it asks for"
            counts[reason] = counts.get(reason, 0) + 1
        parts = [
            f"{count} node{plural(count)} "
            + reason.format(s="" if count != 1 else "s", ve="ve" if count != 1 else "s")
            for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        ]
        return f"in clique {clique}, " + ", ".join(parts) if parts else f"clique {clique} is empty"


def _created(pod: Pod) -> tuple[datetime, str]:
    return (pod.metadata.creation_timestamp or _EPOCH, pod.metadata.name)


def _added_slots(record: PlacementSpec | None, before: PlacementSpec | None) -> dict[str, int]:
    """Per node, the GPU pod slots this plan adds to the record (not counted in the room yet)."""

    def slots(spec: PlacementSpec | None) -> dict[str, int]:
        found: dict[str, int] = {}
        if spec is None or spec.gpus_per_pod < 1:
            return found
        for piece in spec.all_slices:
            for member in piece.members:
                found[member.node] = found.get(member.node, 0) + member.gpus // spec.gpus_per_pod
        return found

    after, earlier = slots(record), slots(before)
    return {
        node: count - earlier.get(node, 0)
        for node, count in after.items()
        if count > earlier.get(node, 0)
    }


def plan_channel_only(
    *,
    key: str,
    record: PlacementSpec | None,
    before: PlacementSpec | None,
    pods: Sequence[Pod],
    gpu_gang: int | None,
    gpu_wait: str,
    view: ClusterView,
    room: ChannelRoom,
    limits: NodeLimits | None,
    slot_of: Callable[[str], int],
    nodes_without_nvlink: int = 0,
) -> ChannelOnlyPlan:
    """Seat the domain's ``pods`` without GPUs (live ones) in ``record``, the record the GPU
    steps of the plan made of ``before`` (see the module docstring). ``gpu_gang``: pods that
    take GPUs the gang wants (None: unknown yet); ``gpu_wait``: why those wait, if they do;
    ``nodes_without_nvlink``: GPU nodes on no NVLink fabric that take new pods, where a
    domain of pods without GPUs that no clique can take runs without IMEX
    (``planning/nvlinkless.py``)."""
    by_name = {pod.metadata.name: pod for pod in pods}
    slices = {piece.index: piece for piece in record.all_slices} if record is not None else {}
    seats: dict[str, ChannelSeat] = {}
    evicting: list[PodRef] = []
    released = False
    for name, seat in sorted(channel_seats(before).items()):
        pod = by_name.get(name)
        if pod is None or pod.metadata.uid != seat.uid:
            released = True
            continue
        piece = slices.get(seat.slice_index)
        if piece is None or piece.clique != seat.clique:
            released = True
            evicting.append(PodRef(name=name, uid=seat.uid))
            continue
        seats[name] = seat
    # Pods of slices that moved are evicted until they are gone (a refusal or a restart does
    # not forget them: the record lists them).
    for ref in before.evicting if before is not None else ():
        pod = by_name.get(ref.name)
        if pod is not None and pod.metadata.uid == ref.uid and ref not in evicting:
            evicting.append(ref)
    evicted = {ref.name for ref in evicting}
    pins = [
        Pin(pod=name, node=seat.node, waited=waited(by_name[name]))
        for name, seat in sorted(seats.items())
        if gated(by_name[name])
    ]
    waiting = sorted(
        (
            pod
            for pod in pods
            if gated(pod)
            and pod.metadata.name not in seats
            and pod.metadata.name not in evicted
            and pod.metadata.deletion_timestamp is None
        ),
        key=_created,
    )
    held: list[Hold] = []
    notices: list[Notice] = []
    wait_for_room = False
    if record is not None and not record.multi_node_nvlink:
        pins.extend(Pin(pod=pod.metadata.name, node="", waited=waited(pod)) for pod in waiting)
        waiting = []
    seating = _Seating(room, limits, added=_added_slots(record, before))
    if waiting and (record is None or not record.all_slices):
        if gpu_gang is None:
            waiting = []  # the gang's size is not known yet: look again soon
        elif gpu_gang > 0:
            held.extend(holds(waiting, WAITING_FOR_GPU_PODS, _gpu_wait(gpu_wait)))
            waiting = []
        else:
            first, why = _first_slice(key, record, view, seating, wanted=len(waiting))
            if first is not None:
                record = first
                slices = {piece.index: piece for piece in record.all_slices}
            elif record is None and why == _NO_ROOM and nodes_without_nvlink > 0:
                record = record_without_nvlink(gpus_per_pod=0, size=0)
                pins.extend(
                    Pin(pod=pod.metadata.name, node="", waited=waited(pod)) for pod in waiting
                )
                notices.append(
                    Notice(type="Normal", reason=WITHOUT_NVLINK, message=WITHOUT_NVLINK_MESSAGE)
                )
                waiting = []
            else:
                if not view.cliques:
                    why = "the cluster has no NVLink clique"
                elif why == _NO_ROOM:
                    why = "; ".join(seating.why_not(view, state.id) for state in view.cliques)
                message = f"{_NO_CHANNEL}: {why}{_constraints(limits)}"
                held.extend(holds(waiting, NO_CHANNEL_AVAILABLE, message))
                wait_for_room = True
                waiting = []
    left: list[Pod] = []
    for pod in waiting:
        found = _seat_in(slices, seats, seating, view)
        if found is None:
            left.append(pod)
            continue
        index, node = found
        seats[pod.metadata.name] = ChannelSeat(
            slice_index=index, clique=slices[index].clique, node=node, uid=pod.metadata.uid
        )
        seating.take(node)
        pins.append(Pin(pod=pod.metadata.name, node=node, waited=waited(pod)))
    if left:
        cliques = list(dict.fromkeys(piece.clique for _, piece in sorted(slices.items())))
        why = "; ".join(seating.why_not(view, clique) for clique in cliques)
        message = f"{_NO_NODE}{plural(len(cliques))} {', '.join(cliques)}: {why}"
        held.extend(holds(left, NO_CHANNEL_AVAILABLE, message + _constraints(limits)))
        wait_for_room = True
    for reason in dict.fromkeys(hold.reason for hold in held):
        message = next(hold.message for hold in held if hold.reason == reason)
        notices.append(Notice(type="Warning", reason=reason, message=message))
    merged = _merged(record, seats, evicting, count=len(pods), slot_of=slot_of)
    return ChannelOnlyPlan(
        record=merged,
        pins=tuple(sorted(pins, key=lambda pin: pin.pod)),
        holds=tuple(held),
        notices=tuple(notices),
        waiting=wait_for_room,
        released=released,
        evictions=tuple(
            sorted(
                ref.name
                for ref in evicting
                if by_name[ref.name].metadata.deletion_timestamp is None
            )
        ),
    )


_NO_CHANNEL = (
    "no clique can give this pod, which asks for no GPU, the domain's IMEX channel on a node "
    "with a free attachment device"
)
_NO_NODE = (
    "no node can take this pod, which asks for no GPU but needs the domain's IMEX channel and a "
    "free attachment device, in the domain's clique"
)


_NO_ROOM = "no clique has a node with room"


def _constraints(limits: NodeLimits | None) -> str:
    return f" (the pod's constraints: {limits.why})" if limits is not None and limits.why else ""


def _gpu_wait(why: str) -> str:
    message = (
        "this pod asks for no GPU: it goes to a clique the domain's pods that take GPUs are "
        "placed in, and none of them is placed yet"
    )
    return f"{message} ({why})" if why else message


def _seat_in(
    slices: Mapping[int, PlacementSlice],
    seats: Mapping[str, ChannelSeat],
    seating: _Seating,
    view: ClusterView,
) -> tuple[int, str] | None:
    """The slice and node the next pod goes to, or None."""
    for index, piece in sorted(slices.items()):
        members = frozenset(
            {member.node for member in piece.members}
            | {seat.node for seat in seats.values() if seat.slice_index == index}
        )
        found = seating.best_node(view, piece.clique, members)
        if found is not None:
            return index, found[0]
    return None


def _first_slice(
    key: str, record: PlacementSpec | None, view: ClusterView, seating: _Seating, *, wanted: int
) -> tuple[PlacementSpec | None, str]:
    """A record of one slice of no ranks in the clique with the most room and a free channel
    for the domain; or None and why there is none."""
    best: tuple[int, str, int] | None = None
    full: list[str] = []
    for state in view.cliques:
        channel = state.channel_for(key)
        room = seating.clique_room(view, state.id, wanted)
        if room and channel is None:
            full.append(state.id)
        if not room or channel is None:
            continue
        if best is None or (-room, state.id) < (-best[0], best[1]):
            best = (room, state.id, channel)
    if best is None:
        if full:
            have = "have" if len(full) != 1 else "has"
            return None, (
                f"clique{plural(len(full))} {', '.join(full)} {have} all {MAX_CHANNELS} IMEX "
                "channels in use, and no other has a node with room"
            )
        return None, _NO_ROOM
    _, clique, channel = best
    piece = PlacementSlice(index=0, clique=clique, channel=channel)
    base = record or PlacementSpec(gpus_per_pod=0, size=0)
    return msgspec.structs.replace(base, slices=(piece,)), ""


def _merged(
    record: PlacementSpec | None,
    seats: Mapping[str, ChannelSeat],
    evicting: Sequence[PodRef],
    *,
    count: int,
    slot_of: Callable[[str], int],
) -> PlacementSpec | None:
    """``record`` with the seats in its slices' members, the count, and the pods to evict."""
    if record is None:
        return None
    by_slice: dict[int, dict[str, list[PodRef]]] = {}
    for name, seat in seats.items():
        by_slice.setdefault(seat.slice_index, {}).setdefault(seat.node, []).append(
            PodRef(name=name, uid=seat.uid)
        )
    slices = []
    for piece in record.all_slices:
        extra = by_slice.get(piece.index, {})
        members = [
            msgspec.structs.replace(
                member,
                channel_only_pods=tuple(sorted(extra.get(member.node, ()), key=lambda r: r.name)),
            )
            for member in piece.members
        ]
        known = {member.node for member in members}
        members.extend(
            SliceMember(
                node=node,
                slot=slot_of(node),
                channel_only_pods=tuple(sorted(refs, key=lambda r: r.name)),
            )
            for node, refs in extra.items()
            if node not in known
        )
        members.sort(key=lambda member: (member.slot, member.node))
        slices.append(msgspec.structs.replace(piece, members=tuple(members)))
    listed = {ref.uid: ref for ref in (*record.evicting, *evicting)}
    return msgspec.structs.replace(
        record,
        slices=tuple(slices),
        channel_only=count,
        evicting=tuple(sorted(listed.values(), key=lambda ref: (ref.name, ref.uid))),
    )
