"""Gang placement on 64 NVL72 racks: cdo's engine next to the anchor's model and first-fit.

One seeded trace of ComputeDomain gangs (1 to 72 GPUs; pods of 1, 2 or 4 GPUs; plus a small
share of multi-rack gangs of 2 to 16 racks' worth of 4-GPU pods, larger than any clique; Poisson
arrivals, exponential run times, offered load above capacity so the cluster saturates) is
replayed against three policies, each on its own copy of the same cluster (one clique per rack,
18 nodes of 4 GPUs per rack):

- ours: ``services.clique_allocator.placement`` (whole gangs, per-GPU sharing between domains,
  fragmentation-aware best fit); a multi-rack gang is sliced by the engine (``slice_pods=None``)
  into the fewest slices that fit now, each inside one clique, all or nothing;
- anchor: the anchor driver's model as its seed workload sets it up: every pod takes a whole
  node, a node serves one domain, and pods are scheduled one at a time the way kube-scheduler
  does with least-allocated scoring and the seed's required pod affinity on
  ``nvidia.com/gpu.clique``. The first pod lands on any free node (every free node is empty, so
  least-allocated scores tie and the pick is random) and so picks the clique; later pods take
  free nodes of that clique and wait when there are none. Such a partly placed gang counts as
  failed, and the GPUs it holds while it waits as stranded. Its waiting pods take nodes of its
  clique as they free up, before any new gang (they are older in the scheduler's queue); a gang
  that gets all its pods that way runs late, one still incomplete after the patience time
  gives up and frees its nodes. A multi-rack gang cannot keep the required affinity (its pods
  beyond one clique would never schedule), so it has none: each of its pods takes a random free
  node in any clique, and while incomplete it waits for nodes freed in any clique, in the same
  arrival order as the others. Its one domain then spans cliques: a split slice;
- first-fit: clique-aware and per-GPU like ours, but takes the first clique (by id) with room
  and fills its nodes in slot order; a multi-rack gang takes all the room of each clique with
  room, in id order, until it is covered (the last slice takes the rest), all or nothing.

A gang that does not fit waits in a FIFO queue; after every departure the first ``--depth``
waiting gangs are tried again (smaller gangs may pass bigger ones), and a gang still waiting
after ``--patience`` time units gives up. Figures are time averages over the saturated part
of the run (from ``--warmup`` of the arrivals to the last arrival). GPU allocation counts the
GPUs the running gangs asked for; stranded GPUs are held but doing no work (the rest of a node
a small pod locked, nodes of partly placed gangs). Decision time is the wall time of one
placement attempt for a gang, placed or not, including the update of the policy's state.
A split slice is one whose pods are in more than one clique (the anchor's multi-rack gang is
one slice); a partial gang is one placed in part.

The anchor's figures are the model's: nothing here runs NVIDIA's DRA driver. The output says so,
lists the model's assumptions (``MODEL_ASSUMPTIONS``), and prints ours' gain in GPU allocation
over first fit (``gain_vs_firstfit_pts``) beside its gain over the model (``gain_vs_anchor_pts``).
A figure of nothing (a quantile of no attempts; the multi-rack figures of a trace without
multi-rack gangs) has no RESULT key.

A last table replays a trace of constraint-bearing gangs (tolerations, a pool selector, memory;
``bench/_constrained.py``) and the same trace without constraints on the nodes they leave.

    python -m bench.placement [--racks 64] [--gangs 8000] [--load 1.6] [--seed 7]
        [--multirack-share 0.04] [--multirack-racks 2 16] [--constrained-gangs 4000]
"""

from __future__ import annotations

import argparse
import gc
import heapq
import math
import random
import time
import uuid
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from bench._report import fixed, percentile, result_line
from services.clique_allocator.placement import (
    Clique,
    ClusterView,
    GangRequest,
    Node,
    Placed,
    place,
)

NODES_PER_RACK = 18
GPUS_PER_NODE = 4
RACK_GPUS = NODES_PER_RACK * GPUS_PER_NODE
POD_SHAPES = ((4, 0.5), (2, 0.2), (1, 0.3))
"""(GPUs per pod, share of gangs)."""
FULL_RACK_SHARE = 0.06
"""Gangs that are the seed workload itself: 18 pods of 4 GPUs, a whole rack."""
MULTIRACK_SHARE = 0.04
"""Share of arrivals that are multi-rack gangs (``--multirack-share``)."""
MULTIRACK_RACKS = (2, 16)
"""Multi-rack gangs' size range in racks' worth of 4-GPU pods (``--multirack-racks``)."""


class Gang(NamedTuple):
    key: str
    arrival: float
    duration: float
    pods: int
    gpus_per_pod: int

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def multirack(self) -> bool:
        """More GPUs than a rack has: larger than any clique, for every policy."""
        return self.gpus > RACK_GPUS


class Outcome(NamedTuple):
    """One gang's placement: whole (``placed``) or in part (``partial``), or not at all."""

    placed: bool
    partial: bool = False
    split_slices: int = 0
    """Slices of the gang whose pods are in more than one clique."""
    cliques: int = 0
    """Distinct cliques the gang's pods are in, once placed."""


NOT_PLACED = Outcome(placed=False)


class Policy(Protocol):
    name: str

    def attempt(self, gang: Gang) -> Outcome: ...

    def remove(self, gang: Gang) -> list[tuple[Gang, Outcome]]:
        """Free the gang's GPUs; returns gangs that now run because of it (anchor only)."""
        ...

    def used_gpus(self) -> int: ...

    def held_gpus(self) -> int: ...

    def check(self) -> None: ...


# --- the cluster and the trace -------------------------------------------------------------


def make_cliques(racks: int, rng: random.Random) -> list[Clique]:
    """One clique per rack, ids as GPU Feature Discovery writes them: ``<cluster uuid>.0``."""
    cliques = []
    for rack in range(racks):
        cluster = uuid.UUID(int=rng.getrandbits(128), version=4)
        nodes = tuple(
            Node(name=f"rack{rack:02d}-tray{slot:02d}", slot=slot, gpus=GPUS_PER_NODE)
            for slot in range(NODES_PER_RACK)
        )
        cliques.append(Clique(id=f"{cluster}.0", nodes=nodes))
    return cliques


def make_gang_shape(rng: random.Random) -> tuple[int, int]:
    """(pods, GPUs per pod): log-uniform gang sizes up to a rack, plus whole-rack gangs."""
    if rng.random() < FULL_RACK_SHARE:
        return NODES_PER_RACK, GPUS_PER_NODE
    gpus_per_pod = rng.choices([g for g, _ in POD_SHAPES], [w for _, w in POD_SHAPES])[0]
    most = RACK_GPUS // gpus_per_pod
    pods = round(math.exp(rng.uniform(0, math.log(most))))
    return max(1, min(most, pods)), gpus_per_pod


def make_multirack_shape(rng: random.Random, racks: tuple[int, int]) -> tuple[int, int]:
    """(pods, 4): pods log-uniform from ``racks[0]`` to ``racks[1]`` racks' worth of nodes."""
    low, high = (count * NODES_PER_RACK for count in racks)
    pods = round(math.exp(rng.uniform(math.log(low), math.log(high))))
    return max(NODES_PER_RACK + 1, pods), GPUS_PER_NODE


def make_trace(
    rng: random.Random,
    *,
    gangs: int,
    capacity: int,
    load: float,
    mean_duration: float,
    multirack_share: float = 0.0,
    multirack_racks: tuple[int, int] = MULTIRACK_RACKS,
    multirack_rng: random.Random | None = None,
) -> list[Gang]:
    """The trace; multi-rack gangs are drawn from their own ``multirack_rng``, so every other
    gang's shape is the one a trace without them has (with a share of 0 the trace is identical).
    """
    picker = multirack_rng or random.Random(0)
    shapes = [
        make_multirack_shape(picker, multirack_racks)
        if picker.random() < multirack_share
        else make_gang_shape(rng)
        for _ in range(gangs)
    ]
    mean_gpus = sum(pods * gpus for pods, gpus in shapes) / gangs
    rate = load * capacity / (mean_gpus * mean_duration)
    trace, now = [], 0.0
    for index, (pods, gpus_per_pod) in enumerate(shapes):
        now += rng.expovariate(rate)
        duration = rng.expovariate(1 / mean_duration)
        trace.append(Gang(f"bench/gang-{index:05d}", now, duration, pods, gpus_per_pod))
    return trace


# --- the three policies ----------------------------------------------------------------------


class Ours:
    """cdo's placement engine, advancing one ClusterView as the allocator would."""

    name = "ours (cdo, frag-aware best fit)"

    def __init__(self, cliques: Sequence[Clique]) -> None:
        self.view = ClusterView.build(cliques=cliques, reservations=[])
        self.used = 0
        self.held: dict[str, int] = {}
        """GPUs each domain's reservations hold (a partly placed gang's too, were there one)."""
        self.held_total = 0
        self.running: set[str] = set()

    def attempt(self, gang: Gang) -> Outcome:
        request = GangRequest(domain=gang.key, new_pods=gang.pods, gpus_per_pod=gang.gpus_per_pod)
        decision = place(self.view, request)
        if not isinstance(decision, Placed):
            return NOT_PLACED
        self.view = self.view.with_domain(decision.domain, decision.reservations)
        return self._record(gang, decision)

    def _record(self, gang: Gang, decision: Placed) -> Outcome:
        """Account for a placement, and check it against the request and the cliques."""
        split = 0
        cliques: set[str | None] = set()
        for reservation in decision.reservations:
            homes = {self.view.clique_of(share.node) for share in reservation.shares}
            split += bool(homes - {reservation.clique})
            cliques |= homes | {reservation.clique}
        gpus = sum(reservation.gpus for reservation in decision.reservations)
        self.held[gang.key] = gpus
        self.held_total += gpus
        whole = gpus == gang.gpus and len(decision.pod_nodes) == gang.pods
        if whole:
            self.running.add(gang.key)
            self.used += gang.gpus
        return Outcome(placed=whole, partial=not whole, split_slices=split, cliques=len(cliques))

    def remove(self, gang: Gang) -> list[tuple[Gang, Outcome]]:
        self.view = self.view.with_domain(gang.key, ())
        self.held_total -= self.held.pop(gang.key)
        if gang.key in self.running:
            self.running.remove(gang.key)
            self.used -= gang.gpus
        return []

    def used_gpus(self) -> int:
        return self.used

    def held_gpus(self) -> int:
        return self.held_total

    def check(self) -> None:
        """No node holds more than it has, slices stay in their clique, channels are unique."""
        held: dict[str, int] = {}
        channels: dict[str, dict[int, str]] = {}
        for reservation in self.view.reservations:
            owner = channels.setdefault(reservation.clique, {})
            assert owner.setdefault(reservation.channel, reservation.domain) == reservation.domain
            for share in reservation.shares:
                assert self.view.clique_of(share.node) == reservation.clique, "a split slice"
                held[share.node] = held.get(share.node, 0) + share.pods * reservation.gpus_per_pod
        assert all(gpus <= GPUS_PER_NODE for gpus in held.values()), "a node is over-committed"
        assert sum(held.values()) == self.held_total


class FirstFitSlice(NamedTuple):
    clique: str
    channel: int
    taken: list[tuple[int, int]]
    """(node slot, pods) in slot order."""
    gpus: int


class FirstFit:
    """Clique-aware first fit with per-GPU sharing: first clique with room, nodes by slot.

    A gang larger than any clique is cut into slices of whole cliques' room, cliques in id
    order, the last slice taking the rest; all or nothing.
    """

    name = "clique-aware first fit"

    def __init__(self, cliques: Sequence[Clique]) -> None:
        self.cliques = sorted(clique.id for clique in cliques)
        self.free = {clique.id: [node.gpus for node in clique.nodes] for clique in cliques}
        self.free_total = {clique.id: sum(self.free[clique.id]) for clique in cliques}
        self.largest_gpus = max((sum(free) for free in self.free.values()), default=0)
        self.channels: dict[str, set[int]] = {clique: set() for clique in self.cliques}
        self.placed: dict[str, list[FirstFitSlice]] = {}
        self.used = 0

    def _room(self, clique: str, gpus_per_pod: int) -> int:
        return sum(gpus // gpus_per_pod for gpus in self.free[clique])

    def _one_clique(self, gang: Gang) -> list[tuple[str, int]]:
        for clique in self.cliques:
            if self.free_total[clique] < gang.gpus:
                continue
            if self._room(clique, gang.gpus_per_pod) >= gang.pods:
                return [(clique, gang.pods)]
        return []

    def _whole_cliques(self, gang: Gang) -> list[tuple[str, int]]:
        plan: list[tuple[str, int]] = []
        need = gang.pods
        for clique in self.cliques:
            room = self._room(clique, gang.gpus_per_pod)
            if room:
                plan.append((clique, min(room, need)))
                need -= plan[-1][1]
            if need == 0:
                return plan
        return []

    def _fill(self, clique: str, pods: int, gpus_per_pod: int) -> FirstFitSlice:
        free = self.free[clique]
        need = pods
        taken: list[tuple[int, int]] = []
        for slot, gpus in enumerate(free):
            take = min(gpus // gpus_per_pod, need)
            if take:
                free[slot] -= take * gpus_per_pod
                taken.append((slot, take))
                need -= take
            if need == 0:
                break
        channel = min(set(range(len(self.channels[clique]) + 1)) - self.channels[clique])
        self.channels[clique].add(channel)
        self.free_total[clique] -= pods * gpus_per_pod
        return FirstFitSlice(clique, channel, taken, pods * gpus_per_pod)

    def attempt(self, gang: Gang) -> Outcome:
        if gang.gpus <= self.largest_gpus:
            plan = self._one_clique(gang)
        else:
            plan = self._whole_cliques(gang)
        if not plan:
            return NOT_PLACED
        self.placed[gang.key] = [
            self._fill(clique, pods, gang.gpus_per_pod) for clique, pods in plan
        ]
        self.used += gang.gpus
        # Every slice is filled from its own clique's nodes: none can be split.
        return Outcome(placed=True, cliques=len(plan))

    def remove(self, gang: Gang) -> list[tuple[Gang, Outcome]]:
        for placed in self.placed.pop(gang.key):
            for slot, pods in placed.taken:
                self.free[placed.clique][slot] += pods * gang.gpus_per_pod
            self.free_total[placed.clique] += placed.gpus
            self.channels[placed.clique].discard(placed.channel)
        self.used -= gang.gpus
        return []

    def used_gpus(self) -> int:
        return self.used

    def held_gpus(self) -> int:
        return self.used

    def check(self) -> None:
        assert all(0 <= gpus <= GPUS_PER_NODE for free in self.free.values() for gpus in free)
        for clique, free in self.free.items():
            assert sum(free) == self.free_total[clique]


class AnchorModel:
    """Whole nodes, one domain per node, pods one at a time with required clique affinity.

    A multi-rack gang has no affinity (it could never complete with it): its pods take free
    nodes in any clique. Every other gang keeps it, even one of more 1-GPU pods than a clique
    has nodes (which therefore never completes).
    """

    name = "anchor model (whole nodes, pod affinity)"

    def __init__(self, cliques: Sequence[Clique], rng: random.Random) -> None:
        self.rng = rng
        self.cliques = sorted(clique.id for clique in cliques)
        self.free_nodes = {clique.id: list(range(len(clique.nodes))) for clique in cliques}
        self.free_count = sum(len(nodes) for nodes in self.free_nodes.values())
        self.held: dict[str, dict[str, list[int]]] = {}
        """Per gang, the nodes its pods hold, per clique."""
        self.bound: dict[str, str] = {}
        """A gang with clique affinity: the clique its first pod picked."""
        self.waiting: dict[str, list[Gang]] = {clique: [] for clique in self.cliques}
        """Per clique, partly placed gangs bound to it, in arrival order: pods still pending."""
        self.waiting_anywhere: list[Gang] = []
        """Partly placed gangs without affinity (multi-rack), in arrival order."""
        self.used = 0
        self.held_total = 0
        self.running: set[str] = set()

    def _any_clique(self) -> str:
        """The clique of a random free node: least-allocated scores tie on empty nodes."""
        pick = self.rng.randrange(self.free_count)
        for clique in self.cliques:
            if pick < len(self.free_nodes[clique]):
                return clique
            pick -= len(self.free_nodes[clique])
        raise AssertionError("free_count counts more nodes than there are")

    def _take(self, gang: Gang, clique: str) -> None:
        nodes = self.free_nodes[clique]
        # Every free node is empty, so least-allocated scores tie: the scheduler picks at random.
        index = self.rng.randrange(len(nodes))
        nodes[index], nodes[-1] = nodes[-1], nodes[index]
        self.free_count -= 1
        self.held_total += GPUS_PER_NODE
        self.held[gang.key].setdefault(clique, []).append(nodes.pop())

    def _pods(self, gang: Gang) -> int:
        return sum(len(nodes) for nodes in self.held[gang.key].values())

    def _fill(self, gang: Gang, clique: str) -> bool:
        """Schedule the gang's pending pods on free nodes of ``clique``; True once all run."""
        pods = self._pods(gang)
        while pods < gang.pods and self.free_nodes[clique]:
            self._take(gang, clique)
            pods += 1
        if pods < gang.pods:
            return False
        self.running.add(gang.key)
        self.used += gang.gpus
        return True

    def _outcome(self, gang: Gang) -> Outcome:
        cliques = len(self.held[gang.key])
        return Outcome(placed=True, split_slices=int(cliques > 1), cliques=cliques)

    def attempt(self, gang: Gang) -> Outcome:
        if self.free_count == 0:
            return NOT_PLACED
        self.held[gang.key] = {}
        if gang.multirack:
            while self.free_count and self._pods(gang) < gang.pods:
                self._take(gang, self._any_clique())
            if self._pods(gang) == gang.pods:
                self.running.add(gang.key)
                self.used += gang.gpus
                return self._outcome(gang)
            self.waiting_anywhere.append(gang)
            return Outcome(placed=False, partial=True)
        clique = self._any_clique()
        self.bound[gang.key] = clique
        self._take(gang, clique)
        if self._fill(gang, clique):
            return self._outcome(gang)
        self.waiting[clique].append(gang)
        return Outcome(placed=False, partial=True)

    def remove(self, gang: Gang) -> list[tuple[Gang, Outcome]]:
        held = self.held.pop(gang.key)
        for clique, nodes in held.items():
            self.free_nodes[clique].extend(nodes)
            self.free_count += len(nodes)
            self.held_total -= len(nodes) * GPUS_PER_NODE
        clique_bound = self.bound.pop(gang.key, None)
        if gang.key in self.running:
            self.running.remove(gang.key)
            self.used -= gang.gpus
        elif clique_bound is None:
            self.waiting_anywhere.remove(gang)
        else:
            self.waiting[clique_bound].remove(gang)
        started: list[tuple[Gang, Outcome]] = []
        for clique in held:
            while self.free_nodes[clique]:
                first = self._oldest_waiting(clique)
                if first is None or not self._fill(first, clique):
                    break
                bound = first.key in self.bound
                (self.waiting[clique] if bound else self.waiting_anywhere).remove(first)
                started.append((first, self._outcome(first)))
        return started

    def _oldest_waiting(self, clique: str) -> Gang | None:
        """The partly placed gang whose pending pods a node freed in ``clique`` goes to."""
        heads = [queue[0] for queue in (self.waiting[clique], self.waiting_anywhere) if queue]
        return min(heads, key=lambda gang: gang.arrival, default=None)

    def used_gpus(self) -> int:
        return self.used

    def held_gpus(self) -> int:
        return self.held_total

    def check(self) -> None:
        assert self.free_count == sum(len(nodes) for nodes in self.free_nodes.values())
        held = sum(len(nodes) for by in self.held.values() for nodes in by.values())
        assert held * GPUS_PER_NODE == self.held_total
        for key, clique in self.bound.items():
            assert set(self.held[key]) <= {clique}, "a clique-bound gang left its clique"


# --- the replay ------------------------------------------------------------------------------


class Tally(NamedTuple):
    alloc_pct: float
    held_pct: float
    stranded_gpus: float
    placed: int
    """Gangs placed whole when tried."""
    late: int
    """Partly placed gangs whose last pods got nodes later (anchor only); they count as failed."""
    gave_up: int
    partial: int
    """Gangs placed in part (when tried)."""
    split_gangs: int
    """Gangs that fit one clique, placed across cliques."""
    split_slices: int
    """Slices whose pods are in more than one clique, over every gang that ran."""
    waiting_pct: float
    decisions: int
    p50_ms: float
    p99_ms: float
    placing_p50_ms: float
    placing_p99_ms: float
    """Over the attempts that placed a gang: the ones that do all the work."""
    multirack_offered: int
    multirack_placed: int
    """Multi-rack gangs placed whole when tried."""
    multirack_late: int
    multirack_cliques: float
    """Mean cliques a multi-rack gang's pods are in, over those that ran."""
    multirack_decisions: int
    multirack_p99_ms: float
    multirack_placing_p99_ms: float


DEPART, ARRIVE, GIVE_UP = 0, 1, 2
"""Event kinds, in the order they are handled at equal times."""


def replay(
    policy: Policy,
    trace: Sequence[Gang],
    *,
    capacity: int,
    depth: int,
    patience: float,
    warmup: float,
) -> Tally:
    window_start = trace[int(warmup * len(trace))].arrival
    window_end = trace[-1].arrival
    events: list[tuple[float, int, int]] = [
        (gang.arrival, ARRIVE, index) for index, gang in enumerate(trace)
    ]
    heapq.heapify(events)
    index_of = {gang.key: index for index, gang in enumerate(trace)}
    queue: list[int] = []
    running: set[int] = set()
    partly: set[int] = set()
    incomplete: set[int] = set()
    """Partly placed gangs still waiting for pods."""
    used_area = held_area = waiting_time = 0.0
    last = 0.0
    placed = late = gave_up = split_gangs = split_slices = 0
    multirack_placed = multirack_late = 0
    multirack_cliques: list[int] = []
    timings: list[float] = []
    placing: list[float] = []
    multirack_timings: list[float] = []
    multirack_placing: list[float] = []

    def account(now: float) -> None:
        nonlocal used_area, held_area, waiting_time, last
        start, end = max(last, window_start), min(now, window_end)
        if end > start:
            used_area += (end - start) * policy.used_gpus()
            held_area += (end - start) * policy.held_gpus()
            waiting_time += (end - start) if queue or incomplete else 0.0
        last = now

    def run(index: int, now: float, outcome: Outcome) -> None:
        nonlocal placed, late, split_gangs, split_slices, multirack_placed, multirack_late
        gang = trace[index]
        if index in partly:
            late += 1
            multirack_late += gang.multirack
        else:
            placed += 1
            multirack_placed += gang.multirack
        split_slices += outcome.split_slices
        if gang.multirack:
            multirack_cliques.append(outcome.cliques)
        else:
            split_gangs += outcome.cliques > 1
        running.add(index)
        incomplete.discard(index)
        heapq.heappush(events, (now + gang.duration, DEPART, index))

    def attempt(index: int, now: float) -> bool:
        """Try to place a waiting gang; False when it must keep waiting in the queue."""
        gang = trace[index]
        started = time.perf_counter()
        outcome = policy.attempt(gang)
        elapsed = time.perf_counter() - started
        timings.append(elapsed)
        if gang.multirack:
            multirack_timings.append(elapsed)
        if outcome.placed:
            placing.append(elapsed)
            if gang.multirack:
                multirack_placing.append(elapsed)
            run(index, now, outcome)
        elif outcome.partial:
            partly.add(index)
            incomplete.add(index)
            heapq.heappush(events, (gang.arrival + patience, GIVE_UP, index))
        return outcome.placed or outcome.partial

    def free(index: int, now: float) -> None:
        for started, outcome in policy.remove(trace[index]):
            run(index_of[started.key], now, outcome)

    while events:
        now, kind, index = heapq.heappop(events)
        account(now)
        if kind == ARRIVE:
            if not attempt(index, now):
                queue.append(index)
            if index == len(trace) - 1:
                policy.check()  # at saturation: nothing over-committed, channels unique
            continue
        if kind == GIVE_UP:
            if index in incomplete:
                incomplete.remove(index)
                gave_up += 1
                free(index, now)
            continue
        running.discard(index)
        free(index, now)
        still: list[int] = []
        for position, waiting in enumerate(queue):
            if now - trace[waiting].arrival > patience:
                gave_up += 1
            elif position >= depth or not attempt(waiting, now):
                still.append(waiting)
        queue = still
    policy.check()
    span = window_end - window_start
    return Tally(
        alloc_pct=100 * used_area / (span * capacity),
        held_pct=100 * held_area / (span * capacity),
        stranded_gpus=(held_area - used_area) / span,
        placed=placed,
        late=late,
        gave_up=gave_up + len(queue),
        partial=len(partly),
        split_gangs=split_gangs,
        split_slices=split_slices,
        waiting_pct=100 * waiting_time / span,
        decisions=len(timings),
        p50_ms=1000 * percentile(timings, 0.50),
        p99_ms=1000 * percentile(timings, 0.99),
        placing_p50_ms=1000 * percentile(placing, 0.50),
        placing_p99_ms=1000 * percentile(placing, 0.99),
        multirack_offered=sum(gang.multirack for gang in trace),
        multirack_placed=multirack_placed,
        multirack_late=multirack_late,
        multirack_cliques=(
            sum(multirack_cliques) / len(multirack_cliques) if multirack_cliques else math.nan
        ),
        multirack_decisions=len(multirack_timings),
        multirack_p99_ms=1000 * percentile(multirack_timings, 0.99),
        multirack_placing_p99_ms=1000 * percentile(multirack_placing, 0.99),
    )


def rebuild_ms(cliques: Sequence[Clique], trace: Sequence[Gang], *, rounds: int = 5) -> float:
    """A relist's cost: building the view from scratch with a saturated cluster's reservations."""
    policy = Ours(cliques)
    for gang in trace:
        if not policy.attempt(gang).placed:
            break
    reservations = policy.view.reservations
    best = math.inf
    for _ in range(rounds):
        started = time.perf_counter()
        ClusterView.build(cliques=cliques, reservations=reservations)
        best = min(best, time.perf_counter() - started)
    return 1000 * best


def print_table(policies: Sequence[tuple[str, Policy]], tallies: dict[str, Tally]) -> None:
    header = (
        f"{'policy':<42}{'alloc %':>8}{'held %':>8}{'placed':>8}{'failed':>8}{'stranded':>10}"
        f"{'split':>7}{'partial':>9}{'p50 ms':>8}{'p99 ms':>8}{'placing p50/p99 ms':>20}"
    )
    print(header)
    print("-" * len(header))
    for key, policy in policies:
        t = tallies[key]
        placing = f"{t.placing_p50_ms:.3f} / {t.placing_p99_ms:.3f}"
        print(
            f"{policy.name:<42}{t.alloc_pct:>8.1f}{t.held_pct:>8.1f}{t.placed:>8}"
            f"{t.gave_up + t.late:>8}{t.stranded_gpus:>10.0f}{t.split_slices:>7}{t.partial:>9}"
            f"{t.p50_ms:>8.3f}{t.p99_ms:>8.3f}{placing:>20}"
        )
    anchor = tallies["anchor"]
    attempts = ", ".join(f"{key} {tallies[key].decisions}" for key, _ in policies)
    notes = [
        "alloc %: GPUs the running gangs asked for (time average over the saturated window);",
        "held %: GPUs taken, with those locked by small pods and held by partly placed gangs;",
        "placed: gangs placed whole when tried; failed: gave up waiting, or partly placed and",
        f"  completed late (anchor: {anchor.late} of {anchor.partial} partly placed gangs; their "
        "GPU use still counts in alloc %);",
        "stranded: GPUs held but idle (time average); split: slices with pods in two or more",
        "  cliques (the anchor's multi-rack gang is one slice); partial: partly placed gangs;",
        f"  p50/p99: decision time over every attempt, placed or not ({attempts});",
        "  placing: over the attempts that placed a gang.",
        "The anchor's and first fit's times are this script's models of them, not their real cost.",
    ]
    print()
    print("\n".join(notes))
    print()
    print("\n".join(gains(tallies)))


MODEL_ASSUMPTIONS = (
    "every pod takes a whole node, and a node serves one domain;",
    "pods are scheduled one at a time as kube-scheduler does with least-allocated scoring: the",
    "  first pod lands on a random free node (every free node is empty, scores tie) and picks",
    "  the clique, later pods need the required pod affinity on nvidia.com/gpu.clique;",
    "a multi-rack gang has no affinity (it could never complete with it): its pods take free",
    "  nodes in any clique;",
    "a partly placed gang holds its nodes, takes nodes freed in its clique before any new gang,",
    "  and gives up after --patience; it counts as failed, its idle GPUs as stranded.",
)
"""What the anchor model assumes (the module docstring says why); printed with its figures."""


def gains(tallies: dict[str, Tally]) -> list[str]:
    """Ours' GPU allocation against first fit (both run here) and against the anchor model (a
    model of the anchor, not the anchor), side by side, with the model's assumptions."""
    ours, first, anchor = tallies["ours"], tallies["firstfit"], tallies["anchor"]
    return [
        "gain of ours in GPU allocation, in points:",
        f"  over clique-aware first fit  {ours.alloc_pct - first.alloc_pct:+6.1f}"
        "  (both policies replayed here on the same trace)",
        f"  over the anchor model        {ours.alloc_pct - anchor.alloc_pct:+6.1f}"
        "  (a model of the anchor, not the driver: see below)",
        "the anchor model (this script's, not measured on NVIDIA's DRA driver) assumes:",
        *(f"  {line}" for line in MODEL_ASSUMPTIONS),
    ]


def print_multirack_table(
    policies: Sequence[tuple[str, Policy]], tallies: dict[str, Tally], racks: tuple[int, int]
) -> None:
    offered = tallies["ours"].multirack_offered
    if not offered:
        print("multi-rack gangs: none in the trace (--multirack-share 0)")
        return
    print(
        f"multi-rack gangs: {offered} offered, {racks[0]} to {racks[1]} racks' worth "
        f"({racks[0] * NODES_PER_RACK} to {racks[1] * NODES_PER_RACK} pods of {GPUS_PER_NODE} GPUs)"
    )
    header = (
        f"{'policy':<42}{'placed':>8}{'late':>6}{'failed':>8}{'cliques/gang':>14}"
        f"{'attempts':>10}{'p99 ms':>8}{'placing p99 ms':>16}"
    )
    print(header)
    print("-" * len(header))
    for key, policy in policies:
        t = tallies[key]
        print(
            f"{policy.name:<42}{t.multirack_placed:>8}{t.multirack_late:>6}"
            f"{t.multirack_offered - t.multirack_placed:>8}{t.multirack_cliques:>14.1f}"
            f"{t.multirack_decisions:>10}{t.multirack_p99_ms:>8.3f}"
            f"{t.multirack_placing_p99_ms:>16.3f}"
        )
    print()
    print(
        "placed: placed whole when tried; late: partly placed, completed later (counted failed);\n"
        "cliques/gang: cliques a placed gang's pods are in (ours, first fit: one slice each);\n"
        "p99: decision time over the multi-rack gangs' attempts, placing p99: those that placed."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--gangs", type=int, default=8000)
    parser.add_argument("--load", type=float, default=1.6, help="offered GPU load / capacity")
    parser.add_argument("--mean-duration", type=float, default=100.0)
    parser.add_argument("--patience", type=float, default=200.0)
    parser.add_argument("--depth", type=int, default=8, help="waiting gangs retried per departure")
    parser.add_argument("--warmup", type=float, default=0.25, help="share of arrivals skipped")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--multirack-share",
        type=float,
        default=MULTIRACK_SHARE,
        help="share of arrivals that are multi-rack gangs (0: the single-rack trace)",
    )
    parser.add_argument(
        "--multirack-racks",
        type=int,
        nargs=2,
        default=MULTIRACK_RACKS,
        metavar=("LOW", "HIGH"),
        help="multi-rack gang sizes, in racks' worth of 4-GPU pods",
    )
    parser.add_argument(
        "--constrained-gangs",
        type=int,
        default=4000,
        help="gangs of the constrained trace (bench/_constrained.py; 0: skip it)",
    )
    args = parser.parse_args()
    racks: tuple[int, int] = tuple(args.multirack_racks)

    rng = random.Random(args.seed)
    cliques = make_cliques(args.racks, rng)
    capacity = args.racks * RACK_GPUS
    trace = make_trace(
        rng,
        gangs=args.gangs,
        capacity=capacity,
        load=args.load,
        mean_duration=args.mean_duration,
        multirack_share=args.multirack_share,
        multirack_racks=racks,
        multirack_rng=random.Random(args.seed + 2),
    )
    policies: list[tuple[str, Policy]] = [
        ("ours", Ours(cliques)),
        ("firstfit", FirstFit(cliques)),
        ("anchor", AnchorModel(cliques, random.Random(args.seed + 1))),
    ]
    mean_gpus = sum(gang.gpus for gang in trace) / len(trace)
    multirack = [gang for gang in trace if gang.multirack]
    multirack_gpus = sum(gang.gpus for gang in multirack)
    print(
        f"{args.racks} racks, {args.racks * NODES_PER_RACK} nodes, {capacity} GPUs; "
        f"{len(trace)} gangs (mean {mean_gpus:.1f} GPUs), offered load {args.load:.2f}x, "
        f"seed {args.seed}; {len(multirack)} multi-rack gangs "
        f"({args.multirack_share:.0%} share, "
        f"{multirack_gpus / max(1, sum(gang.gpus for gang in trace)):.0%} of the GPUs asked)"
    )
    tallies: dict[str, Tally] = {}
    for key, policy in policies:
        gc.collect()
        started = time.perf_counter()
        tallies[key] = replay(
            policy,
            trace,
            capacity=capacity,
            depth=args.depth,
            patience=args.patience,
            warmup=args.warmup,
        )
        print(f"  replayed {policy.name} in {time.perf_counter() - started:.1f} s")
    print()
    print_table(policies, tallies)
    print()
    print_multirack_table(policies, tallies, racks)
    rebuild = rebuild_ms(cliques, trace)
    print(f"full view rebuild (relist) at saturation: {rebuild:.1f} ms")
    pairs = result(tallies, rebuild)
    if args.constrained_gangs > 0:
        pairs += constrained_result(args, cliques, racks)
    print(result_line(pairs))


def constrained_result(
    args: argparse.Namespace, cliques: Sequence[Clique], racks: tuple[int, int]
) -> Figures:
    """Replay a trace of constraint-bearing gangs (bench/_constrained.py) and the same trace
    without constraints on the nodes they leave; print the table, return the RESULT keys."""
    from bench import _constrained as constrained

    capacity = constrained.open_capacity(args.racks)
    trace = make_trace(
        random.Random(args.seed + 3),
        gangs=args.constrained_gangs,
        capacity=capacity,
        load=args.load,
        mean_duration=args.mean_duration,
        multirack_share=args.multirack_share,
        multirack_racks=racks,
        multirack_rng=random.Random(args.seed + 4),
    )
    runs: list[tuple[str, Policy]] = [
        ("constrained", constrained.Constrained(cliques, random.Random(args.seed + 5))),
        ("same_nodes", Ours(constrained.open_cliques(cliques))),
    ]
    tallies: dict[str, Tally] = {}
    for key, policy in runs:
        gc.collect()
        tallies[key] = replay(policy, trace, capacity=capacity, depth=args.depth,
                              patience=args.patience, warmup=args.warmup)  # fmt: skip
    print()
    print(
        f"constrained pods: {len(trace)} gangs, every GPU node tainted, trays "
        f"{constrained.OPEN_TRAYS}-17 of each rack ruled out by a taint, a pool selector and "
        f"memory; alloc % over the {capacity} GPUs left"
    )
    header = f"{'run':<42}{'alloc %':>8}{'placed':>8}{'p50 ms':>8}{'p99 ms':>8}"
    print(header)
    print("-" * len(header))
    names = {"constrained": "ours, constrained pods (limits included)",
             "same_nodes": "ours, no constraints, the same nodes"}  # fmt: skip
    for key, _ in runs:
        t = tallies[key]
        print(f"{names[key]:<42}{t.alloc_pct:>8.1f}{t.placed:>8}{t.p50_ms:>8.3f}{t.p99_ms:>8.3f}")
    ours, same = tallies["constrained"], tallies["same_nodes"]
    return [
        ("constrained_alloc_pct", fixed(ours.alloc_pct, 1)),
        ("unconstrained_alloc_pct_same_nodes", fixed(same.alloc_pct, 1)),
        ("constrained_gap_pts", fixed(same.alloc_pct - ours.alloc_pct, 1)),
        ("constrained_p50_ms", fixed(ours.p50_ms, 3)),
        ("constrained_p99_ms", fixed(ours.p99_ms, 3)),
        ("unconstrained_p99_ms_same_nodes", fixed(same.p99_ms, 3)),
    ]


Figures = list[tuple[str, str | None]]


def result(tallies: dict[str, Tally], rebuild: float) -> Figures:
    """The RESULT line's keys and values: plain numbers, the unit in the key. A figure of no
    sample (a quantile of no attempts) is None, and the multi-rack figures are left out when the
    trace has no multi-rack gang: no key for what was not measured."""
    ours, first, anchor = tallies["ours"], tallies["firstfit"], tallies["anchor"]
    pairs: Figures = [
        ("ours_alloc_pct", fixed(ours.alloc_pct, 1)),
        ("firstfit_alloc_pct", fixed(first.alloc_pct, 1)),
        ("anchor_alloc_pct", fixed(anchor.alloc_pct, 1)),
        ("gain_vs_anchor_pts", fixed(ours.alloc_pct - anchor.alloc_pct, 1)),
        ("gain_vs_firstfit_pts", fixed(ours.alloc_pct - first.alloc_pct, 1)),
        ("ours_gangs_placed", str(ours.placed)),
        ("firstfit_gangs_placed", str(first.placed)),
        ("anchor_gangs_placed", str(anchor.placed)),
        ("ours_stranded_gpus", fixed(ours.stranded_gpus, 0)),
        ("anchor_stranded_gpus", fixed(anchor.stranded_gpus, 0)),
        ("split_gangs", str(ours.split_gangs)),
        ("ours_partial_gangs", str(ours.partial)),
        ("firstfit_split_gangs", str(first.split_gangs)),
        ("anchor_split_gangs", str(anchor.split_gangs)),
        ("anchor_partial_gangs", str(anchor.partial)),
        ("ours_p50_ms", fixed(ours.p50_ms, 3)),
        ("ours_p99_ms", fixed(ours.p99_ms, 3)),
        ("ours_placing_p50_ms", fixed(ours.placing_p50_ms, 3)),
        ("ours_placing_p99_ms", fixed(ours.placing_p99_ms, 3)),
        ("firstfit_p99_ms", fixed(first.p99_ms, 3)),
        ("anchor_p99_ms", fixed(anchor.p99_ms, 3)),
        ("rebuild_ms", fixed(rebuild, 1)),
        ("multirack_offered", str(ours.multirack_offered)),
    ]
    multirack = ours.multirack_offered > 0
    for name, t in (("ours", ours), ("firstfit", first), ("anchor", anchor)):
        if multirack:
            pairs += [
                (f"{name}_multirack_placed", str(t.multirack_placed)),
                (f"{name}_multirack_late", str(t.multirack_late)),
                (f"{name}_multirack_cliques_per_gang", fixed(t.multirack_cliques, 1)),
            ]
        pairs.append((f"{name}_split_slices", str(t.split_slices)))
    pairs.append(("firstfit_partial_gangs", str(first.partial)))
    if multirack:
        pairs += [
            ("ours_multirack_p99_ms", fixed(ours.multirack_p99_ms, 3)),
            ("ours_multirack_placing_p99_ms", fixed(ours.multirack_placing_p99_ms, 3)),
            ("firstfit_multirack_p99_ms", fixed(first.multirack_p99_ms, 3)),
            ("anchor_multirack_p99_ms", fixed(anchor.multirack_p99_ms, 3)),
        ]
    return pairs


if __name__ == "__main__":
    main()
