"""Gang units: the parts of a domain's gang that are placed independently (pure functions).

Most domains are one gang (the unit ``""``). Two kinds are cut into units:

- **LeaderWorkerSet groups.** A pod with the label ``leaderworkerset.sigs.k8s.io/name`` belongs
  to the unit of its group, named by the group's leader pod, ``<lws>-<group-index>``: a group is
  placed all or nothing, with its own channel in its clique, apart from the other groups. Its
  size is the group's pods that use the domain: the leader if the leader StatefulSet ``<lws>``
  makes pods from the domain's claim template, plus ``size - 1`` workers if the group's worker
  StatefulSet (named as the leader pod) does; ``size`` is the annotation
  ``leaderworkerset.sigs.k8s.io/size`` on the leader StatefulSet's pod template. A group whose
  index is at or beyond the leader StatefulSet's ``replicas`` is scaled away (size 0). A group
  whose pods are all gone but which is still wanted (LWS recreating it) keeps its recorded size,
  so it comes back to its own clique. A pod's rank in its group is its ``worker-index`` (less
  one when the leader does not use the domain).
- **``spec.gang.unitLabel``.** A pod's unit is the value of that label; every unit has
  ``spec.gang.size`` pods, and a unit whose pods are all gone is released. A pod without the
  label is refused (InvalidRequest). Pods are unranked within a unit.

An LWS pod that does not carry its group index yet (the LWS webhook sets it at creation; the
simulated controller right after) makes its unit unknown, and the allocator looks again soon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from services.clique_allocator.gang import (
    GangSize,
    JobSetJobs,
    UndeclaredSize,
    UnknownSize,
    WorkloadLookup,
    gang_size,
)
from services.clique_allocator.objects import makes_pods_using
from services.clique_allocator.ranks import LWS_GROUP_INDEX, LWS_SIZE, LWS_WORKER_INDEX
from shared.kube.models import Pod

ONE_GANG = ""
"""The unit of a domain that is one gang."""
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
STATEFUL_SET = "StatefulSet"
UNIT_SEPARATOR = "#"
"""Between a domain's key and a unit's name in the engine's keys (never in an object name)."""


class Units(msgspec.Struct, frozen=True, kw_only=True):
    """The domain's live pods by unit, and those that cannot be given one."""

    pods: Mapping[str, tuple[Pod, ...]]
    unlabelled: tuple[Pod, ...] = ()
    """Pods without ``spec.gang.unitLabel``'s label (refused)."""
    unknown: bool = False
    """Some LWS pod lacks its group index: look again soon."""


def unit_key(domain: str, unit: str) -> str:
    """The engine's key for one unit of ``domain`` (the domain's own key for ``ONE_GANG``)."""
    return domain if unit == ONE_GANG else f"{domain}{UNIT_SEPARATOR}{unit}"


def in_domain(key: str, domain: str) -> bool:
    """Whether the engine's ``key`` is ``domain`` or one of its units."""
    return key == domain or key.startswith(f"{domain}{UNIT_SEPARATOR}")


def split_units(pods: Iterable[Pod], *, unit_label: str | None) -> Units:
    """The pods by unit (see the module docstring)."""
    units: dict[str, list[Pod]] = {}
    unlabelled: list[Pod] = []
    unknown = False
    for pod in pods:
        labels = pod.metadata.labels
        if unit_label:
            value = labels.get(unit_label)
            if value is None:
                unlabelled.append(pod)
            else:
                units.setdefault(value, []).append(pod)
            continue
        lws = labels.get(LWS_NAME)
        if lws is None:
            units.setdefault(ONE_GANG, []).append(pod)
        elif group := labels.get(LWS_GROUP_INDEX):
            units.setdefault(f"{lws}-{group}", []).append(pod)
        else:
            unknown = True
    return Units(
        pods={name: tuple(found) for name, found in units.items()},
        unlabelled=tuple(unlabelled),
        unknown=unknown,
    )


def has_units(units: Units, recorded: Iterable[str]) -> bool:
    """Whether the domain is placed in units (not as the one gang)."""
    named = any(name != ONE_GANG for name in (*units.pods, *recorded))
    return named or bool(units.unlabelled) or units.unknown


class GroupShape(msgspec.Struct, frozen=True, kw_only=True):
    """What an LWS group's unit looks like: its size and whether its leader counts."""

    pods: int
    leader_counts: bool


def lws_group(
    unit: str,
    *,
    namespace: str,
    template: str,
    workload: WorkloadLookup,
    recorded: int | None,
) -> GroupShape | UnknownSize:
    """The size of the LWS group ``unit`` (``<lws>-<group>``); ``recorded`` is the size the
    record gives it (None: not recorded)."""
    lws, _, group = unit.rpartition("-")
    leaders = workload(STATEFUL_SET, namespace, lws)
    if leaders is None:
        return UnknownSize(message=f"waiting to see the leader StatefulSet {lws}")
    wanted = 1 if leaders.spec.replicas is None else leaders.spec.replicas
    leader_counts = makes_pods_using(leaders, template)
    if group.isdigit() and int(group) >= wanted:
        return GroupShape(pods=0, leader_counts=leader_counts)
    size_text = leaders.spec.template.metadata.annotations.get(LWS_SIZE, "1")
    size = int(size_text) if size_text.isdigit() else 1
    if size <= 1:
        return GroupShape(pods=int(leader_counts), leader_counts=leader_counts)
    workers = workload(STATEFUL_SET, namespace, unit)
    if workers is None:
        if recorded is not None:
            return GroupShape(pods=recorded, leader_counts=leader_counts)
        return UnknownSize(message=f"waiting to see the worker StatefulSet {unit}")
    worker_pods = (size - 1) if makes_pods_using(workers, template) else 0
    return GroupShape(pods=int(leader_counts) + worker_pods, leader_counts=leader_counts)


def group_ranks(pods: Iterable[Pod], *, leader_counts: bool) -> dict[str, int]:
    """Ranks in an LWS group: the worker index (less one when the leader takes no rank)."""
    offset = 0 if leader_counts else 1
    ranks: dict[str, int] = {}
    for pod in pods:
        text = pod.metadata.labels.get(LWS_WORKER_INDEX, "")
        if text.isdigit() and int(text) - offset >= 0:
            ranks[pod.metadata.name] = int(text) - offset
    return ranks


def labelled_unit(size: int, *, live: bool, label: str) -> GangSize:
    """A ``spec.gang.unitLabel`` unit: ``spec.gang.size`` pods while it has live pods."""
    return GangSize(pods=size if live else 0, source=f"spec.gang.size per value of {label}")


class UnitAsk(msgspec.Struct, frozen=True, kw_only=True):
    """One unit: its live pods, its size and its pods' ranks in it."""

    pods: tuple[Pod, ...] = ()
    gang: GangSize | UnknownSize | UndeclaredSize
    ranks: Mapping[str, int] = msgspec.field(default_factory=dict)


RanksOf = Callable[[Sequence[Pod]], Mapping[str, int]]
"""Pods -> their ranks from their workloads' index labels (``ranks.py``)."""


def unit_asks(
    units: Units,
    *,
    recorded: Mapping[str, int],
    explicit: int | None,
    unit_label: str | None,
    namespace: str,
    template: str,
    workload: WorkloadLookup,
    jobset_jobs: JobSetJobs,
    ranks_of: RanksOf,
) -> dict[str, UnitAsk]:
    """What each unit asks for: every unit with live pods, and every recorded one (whose size
    the record gives, ``recorded``); ``explicit`` is ``spec.gang.size``, per unit."""
    asks: dict[str, UnitAsk] = {}
    for unit in sorted({*units.pods, *recorded}):
        pods = units.pods.get(unit, ())
        if unit == ONE_GANG:
            gang = gang_size(
                explicit=explicit,
                pods=pods,
                workload=workload,
                template=template,
                jobset_jobs=jobset_jobs,
            )
            asks[unit] = UnitAsk(pods=pods, gang=gang, ranks=ranks_of(pods))
        elif unit_label:
            gang = labelled_unit(explicit or 0, live=bool(pods), label=unit_label)
            asks[unit] = UnitAsk(pods=pods, gang=gang)
        else:
            shape = lws_group(
                unit,
                namespace=namespace,
                template=template,
                workload=workload,
                recorded=recorded.get(unit),
            )
            if isinstance(shape, UnknownSize):
                asks[unit] = UnitAsk(pods=pods, gang=shape)
                continue
            size = shape.pods if explicit is None or shape.pods == 0 else explicit
            source = f"LeaderWorkerSet group {unit}: {size}"
            asks[unit] = UnitAsk(
                pods=pods,
                gang=GangSize(pods=size, source=source),
                ranks=group_ranks(pods, leader_counts=shape.leader_counts),
            )
    return asks
