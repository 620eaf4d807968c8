"""Gang placement on 64 NVL72 racks: cdo's engine next to the anchor's model and first-fit.

One seeded trace of ComputeDomain gangs (1 to 72 GPUs; pods of 1, 2 or 4 GPUs; Poisson
arrivals, exponential run times, offered load above capacity so the cluster saturates) is
replayed against three policies, each on its own copy of the same cluster (one clique per rack,
18 nodes of 4 GPUs per rack):

- ours: ``services.clique_allocator.placement`` (whole gangs, per-GPU sharing between domains,
  fragmentation-aware best fit);
- anchor: the anchor driver's model as its seed workload sets it up: every pod takes a whole
  node, a node serves one domain, and pods are scheduled one at a time the way kube-scheduler
  does with least-allocated scoring and the seed's required pod affinity on
  ``nvidia.com/gpu.clique``. The first pod lands on any free node (every free node is empty, so
  least-allocated scores tie and the pick is random) and so picks the clique; later pods take
  free nodes of that clique and wait when there are none. Such a partly placed gang counts as
  failed, and the GPUs it holds while it waits as stranded. Its waiting pods take nodes of its
  clique as they free up, before any new gang (they are older in the scheduler's queue); a gang
  that gets all its pods that way runs late, one still incomplete after the patience time
  gives up and frees its nodes;
- first-fit: clique-aware and per-GPU like ours, but takes the first clique (by id) with room
  and fills its nodes in slot order.

A gang that does not fit waits in a FIFO queue; after every departure the first ``--depth``
waiting gangs are tried again (smaller gangs may pass bigger ones), and a gang still waiting
after ``--patience`` time units gives up. Figures are time averages over the saturated part
of the run (from ``--warmup`` of the arrivals to the last arrival). GPU allocation counts the
GPUs the running gangs asked for; stranded GPUs are held but doing no work (the rest of a node
a small pod locked, nodes of partly placed gangs). Decision time is the wall time of one
placement attempt for a gang, placed or not, including the update of the policy's state.

    python -m bench.placement [--racks 64] [--gangs 8000] [--load 1.6] [--seed 7]
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

from services.clique_allocator.placement import (
    Clique,
    ClusterView,
    GangRequest,
    Node,
    Placement,
    place,
)

NODES_PER_RACK = 18
GPUS_PER_NODE = 4
POD_SHAPES = ((4, 0.5), (2, 0.2), (1, 0.3))
"""(GPUs per pod, share of gangs)."""
FULL_RACK_SHARE = 0.06
"""Gangs that are the seed workload itself: 18 pods of 4 GPUs, a whole rack."""


class Gang(NamedTuple):
    key: str
    arrival: float
    duration: float
    pods: int
    gpus_per_pod: int

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


class Outcome(NamedTuple):
    placed: bool
    partial: bool = False
    split: bool = False


class Policy(Protocol):
    name: str

    def attempt(self, gang: Gang) -> Outcome: ...

    def remove(self, gang: Gang) -> list[Gang]:
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
    most = NODES_PER_RACK * GPUS_PER_NODE // gpus_per_pod
    pods = round(math.exp(rng.uniform(0, math.log(most))))
    return max(1, min(most, pods)), gpus_per_pod


def make_trace(
    rng: random.Random, *, gangs: int, capacity: int, load: float, mean_duration: float
) -> list[Gang]:
    shapes = [make_gang_shape(rng) for _ in range(gangs)]
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

    def attempt(self, gang: Gang) -> Outcome:
        request = GangRequest(domain=gang.key, pods=gang.pods, gpus_per_pod=gang.gpus_per_pod)
        decision = place(self.view, request)
        if not isinstance(decision, Placement):
            return Outcome(placed=False)
        self.view = self.view.with_domain(decision.domain, decision.reservations)
        self.used += gang.gpus
        cliques = {self.view.clique_of(node) for node in decision.pod_nodes}
        return Outcome(placed=True, split=len(cliques) > 1 or len(decision.cliques) > 1)

    def remove(self, gang: Gang) -> list[Gang]:
        self.view = self.view.with_domain(gang.key, ())
        self.used -= gang.gpus
        return []

    def used_gpus(self) -> int:
        return self.used

    def held_gpus(self) -> int:
        return self.used

    def check(self) -> None:
        """No node holds more than it has, and channels are unique per clique."""
        held: dict[str, int] = {}
        channels: dict[str, dict[int, str]] = {}
        for reservation in self.view.reservations:
            owner = channels.setdefault(reservation.clique, {})
            assert owner.setdefault(reservation.channel, reservation.domain) == reservation.domain
            for share in reservation.shares:
                held[share.node] = held.get(share.node, 0) + share.pods * reservation.gpus_per_pod
        assert all(gpus <= GPUS_PER_NODE for gpus in held.values()), "a node is over-committed"
        assert sum(held.values()) == self.used


class FirstFit:
    """Clique-aware first fit with per-GPU sharing: first clique with room, nodes by slot."""

    name = "clique-aware first fit"

    def __init__(self, cliques: Sequence[Clique]) -> None:
        self.cliques = sorted(clique.id for clique in cliques)
        self.free = {clique.id: [node.gpus for node in clique.nodes] for clique in cliques}
        self.free_total = {clique.id: sum(self.free[clique.id]) for clique in cliques}
        self.channels: dict[str, set[int]] = {clique: set() for clique in self.cliques}
        self.placed: dict[str, tuple[str, int, list[tuple[int, int]]]] = {}
        self.used = 0

    def attempt(self, gang: Gang) -> Outcome:
        need = gang.pods
        for clique in self.cliques:
            if self.free_total[clique] < gang.gpus:
                continue
            free = self.free[clique]
            if sum(gpus // gang.gpus_per_pod for gpus in free) < need:
                continue
            taken: list[tuple[int, int]] = []
            for slot, gpus in enumerate(free):
                pods = min(gpus // gang.gpus_per_pod, need)
                if pods:
                    free[slot] -= pods * gang.gpus_per_pod
                    taken.append((slot, pods))
                    need -= pods
                if need == 0:
                    break
            channel = min(set(range(len(self.channels[clique]) + 1)) - self.channels[clique])
            self.channels[clique].add(channel)
            self.free_total[clique] -= gang.gpus
            self.placed[gang.key] = (clique, channel, taken)
            self.used += gang.gpus
            return Outcome(placed=True)
        return Outcome(placed=False)

    def remove(self, gang: Gang) -> list[Gang]:
        clique, channel, taken = self.placed.pop(gang.key)
        for slot, pods in taken:
            self.free[clique][slot] += pods * gang.gpus_per_pod
        self.free_total[clique] += gang.gpus
        self.channels[clique].discard(channel)
        self.used -= gang.gpus
        return []

    def used_gpus(self) -> int:
        return self.used

    def held_gpus(self) -> int:
        return self.used

    def check(self) -> None:
        assert all(0 <= gpus <= GPUS_PER_NODE for free in self.free.values() for gpus in free)


class AnchorModel:
    """Whole nodes, one domain per node, pods one at a time with required clique affinity."""

    name = "anchor model (whole nodes, pod affinity)"

    def __init__(self, cliques: Sequence[Clique], rng: random.Random) -> None:
        self.rng = rng
        self.cliques = sorted(clique.id for clique in cliques)
        self.free_nodes = {clique.id: list(range(len(clique.nodes))) for clique in cliques}
        self.free_count = sum(len(nodes) for nodes in self.free_nodes.values())
        self.held: dict[str, tuple[str, list[int]]] = {}
        self.waiting: dict[str, list[Gang]] = {clique: [] for clique in self.cliques}
        """Per clique, partly placed gangs in arrival order: their pods still pending."""
        self.used = 0
        self.held_total = 0
        self.running: set[str] = set()

    def _take(self, clique: str) -> int:
        nodes = self.free_nodes[clique]
        # Every free node is empty, so least-allocated scores tie: the scheduler picks at random.
        index = self.rng.randrange(len(nodes))
        nodes[index], nodes[-1] = nodes[-1], nodes[index]
        self.free_count -= 1
        self.held_total += GPUS_PER_NODE
        return nodes.pop()

    def _fill(self, gang: Gang, clique: str, nodes: list[int]) -> bool:
        """Schedule the gang's pending pods on free nodes of its clique; True once all run."""
        while len(nodes) < gang.pods and self.free_nodes[clique]:
            nodes.append(self._take(clique))
        if len(nodes) < gang.pods:
            return False
        self.running.add(gang.key)
        self.used += gang.gpus
        return True

    def attempt(self, gang: Gang) -> Outcome:
        if self.free_count == 0:
            return Outcome(placed=False)
        pick = self.rng.randrange(self.free_count)
        for clique in self.cliques:
            if pick < len(self.free_nodes[clique]):
                break
            pick -= len(self.free_nodes[clique])
        nodes = [self._take(clique)]
        self.held[gang.key] = (clique, nodes)
        if self._fill(gang, clique, nodes):
            return Outcome(placed=True)
        self.waiting[clique].append(gang)
        return Outcome(placed=False, partial=True)

    def remove(self, gang: Gang) -> list[Gang]:
        clique, nodes = self.held.pop(gang.key)
        self.free_nodes[clique].extend(nodes)
        self.free_count += len(nodes)
        self.held_total -= len(nodes) * GPUS_PER_NODE
        if gang.key in self.running:
            self.running.remove(gang.key)
            self.used -= gang.gpus
        else:
            self.waiting[clique].remove(gang)
        started = []
        while self.waiting[clique] and self.free_nodes[clique]:
            first = self.waiting[clique][0]
            if not self._fill(first, clique, self.held[first.key][1]):
                break
            started.append(self.waiting[clique].pop(0))
        return started

    def used_gpus(self) -> int:
        return self.used

    def held_gpus(self) -> int:
        return self.held_total

    def check(self) -> None:
        assert self.free_count == sum(len(nodes) for nodes in self.free_nodes.values())
        held = sum(len(nodes) for _, nodes in self.held.values()) * GPUS_PER_NODE
        assert held == self.held_total


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
    split: int
    waiting_pct: float
    decisions: int
    p50_ms: float
    p99_ms: float
    placing_p50_ms: float
    placing_p99_ms: float
    """Over the attempts that placed a gang: the ones that do all the work."""


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


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
    placed = late = gave_up = split = 0
    timings: list[float] = []
    placing: list[float] = []

    def account(now: float) -> None:
        nonlocal used_area, held_area, waiting_time, last
        start, end = max(last, window_start), min(now, window_end)
        if end > start:
            used_area += (end - start) * policy.used_gpus()
            held_area += (end - start) * policy.held_gpus()
            waiting_time += (end - start) if queue or incomplete else 0.0
        last = now

    def run(index: int, now: float) -> None:
        nonlocal placed, late
        if index in partly:
            late += 1
        else:
            placed += 1
        running.add(index)
        incomplete.discard(index)
        heapq.heappush(events, (now + trace[index].duration, DEPART, index))

    def attempt(index: int, now: float) -> bool:
        """Try to place a waiting gang; False when it must keep waiting in the queue."""
        nonlocal split
        gang = trace[index]
        started = time.perf_counter()
        outcome = policy.attempt(gang)
        timings.append(time.perf_counter() - started)
        if outcome.placed:
            placing.append(timings[-1])
            split += outcome.split
            run(index, now)
        elif outcome.partial:
            partly.add(index)
            incomplete.add(index)
            heapq.heappush(events, (gang.arrival + patience, GIVE_UP, index))
        return outcome.placed or outcome.partial

    def free(index: int, now: float) -> None:
        for started in policy.remove(trace[index]):
            run(index_of[started.key], now)

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
        split=split,
        waiting_pct=100 * waiting_time / span,
        decisions=len(timings),
        p50_ms=1000 * percentile(timings, 0.50),
        p99_ms=1000 * percentile(timings, 0.99),
        placing_p50_ms=1000 * percentile(placing, 0.50),
        placing_p99_ms=1000 * percentile(placing, 0.99),
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
            f"{t.gave_up + t.late:>8}{t.stranded_gpus:>10.0f}{t.split:>7}{t.partial:>9}"
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
        "stranded: GPUs held but idle (time average); split: gangs across cliques; partial:",
        "  partly placed gangs; p50/p99: decision time over every attempt, placed or not",
        f"  ({attempts}); placing: over the attempts that placed a gang.",
        "The anchor's and first fit's times are this script's models of them, not their real cost.",
    ]
    print()
    print("\n".join(notes))


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
    args = parser.parse_args()

    rng = random.Random(args.seed)
    cliques = make_cliques(args.racks, rng)
    capacity = args.racks * NODES_PER_RACK * GPUS_PER_NODE
    trace = make_trace(
        rng, gangs=args.gangs, capacity=capacity, load=args.load, mean_duration=args.mean_duration
    )
    policies: list[tuple[str, Policy]] = [
        ("ours", Ours(cliques)),
        ("firstfit", FirstFit(cliques)),
        ("anchor", AnchorModel(cliques, random.Random(args.seed + 1))),
    ]
    mean_gpus = sum(gang.gpus for gang in trace) / len(trace)
    print(
        f"{args.racks} racks, {args.racks * NODES_PER_RACK} nodes, {capacity} GPUs; "
        f"{len(trace)} gangs (mean {mean_gpus:.1f} GPUs), offered load {args.load:.2f}x, "
        f"seed {args.seed}"
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
    rebuild = rebuild_ms(cliques, trace)
    print(f"full view rebuild (relist) at saturation: {rebuild:.1f} ms")
    ours, first, anchor = tallies["ours"], tallies["firstfit"], tallies["anchor"]
    result = {
        "ours_alloc_pct": f"{ours.alloc_pct:.1f}",
        "firstfit_alloc_pct": f"{first.alloc_pct:.1f}",
        "anchor_alloc_pct": f"{anchor.alloc_pct:.1f}",
        "gain_vs_anchor_pts": f"{ours.alloc_pct - anchor.alloc_pct:.1f}",
        "ours_gangs_placed": str(ours.placed),
        "firstfit_gangs_placed": str(first.placed),
        "anchor_gangs_placed": str(anchor.placed),
        "ours_stranded_gpus": f"{ours.stranded_gpus:.0f}",
        "anchor_stranded_gpus": f"{anchor.stranded_gpus:.0f}",
        "split_gangs": str(ours.split),
        "ours_partial_gangs": str(ours.partial),
        "firstfit_split_gangs": str(first.split),
        "anchor_split_gangs": str(anchor.split),
        "anchor_partial_gangs": str(anchor.partial),
        "ours_p50_ms": f"{ours.p50_ms:.3f}",
        "ours_p99_ms": f"{ours.p99_ms:.3f}",
        "ours_placing_p50_ms": f"{ours.placing_p50_ms:.3f}",
        "ours_placing_p99_ms": f"{ours.placing_p99_ms:.3f}",
        "firstfit_p99_ms": f"{first.p99_ms:.3f}",
        "anchor_p99_ms": f"{anchor.p99_ms:.3f}",
        "rebuild_ms": f"{rebuild:.1f}",
    }
    print("RESULT " + " ".join(f"{key}={value}" for key, value in result.items()))


if __name__ == "__main__":
    main()
