"""What a pod requests, and whether (how many times) it fits a node: kube-scheduler's
NodeResourcesFit arithmetic, in integer milli-units (:mod:`shared.scheduling.quantity`).

- A container's request of a resource is its ``requests`` entry, else its ``limits`` entry
  (the API server defaults a request to its limit).
- A pod requests the sum over its containers, or per resource the largest init container when
  that is more (init containers run one at a time, before the others), plus ``overhead``.
- A pod fits a node when, for every resource it requests, the node's allocatable minus what
  the pods on it request covers it, and (when the node lists ``pods``) one more pod is allowed.
  A resource the node does not list counts as zero allocatable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple, Protocol

from shared.scheduling.quantity import parse_milli_or_zero

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
MILLI = 1000
# kube-scheduler's stand-ins for a container that requests nothing, used only for scoring so
# that such pods still spread.
DEFAULT_CPU_MILLI = 100
DEFAULT_MEMORY_MILLI = 200 * 2**20 * MILLI


class _Resources(Protocol):
    @property
    def requests(self) -> Mapping[str, str]: ...

    @property
    def limits(self) -> Mapping[str, str]: ...


class _Container(Protocol):
    @property
    def resources(self) -> _Resources: ...


class PodRequests(NamedTuple):
    """A pod's requests in milli-units, and its CPU and memory with the scoring stand-ins."""

    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int


def container_requests(container: _Container) -> dict[str, int]:
    merged = {**container.resources.limits, **container.resources.requests}
    return {name: parse_milli_or_zero(value) for name, value in merged.items()}


def pod_requests(
    containers: Iterable[_Container],
    init_containers: Iterable[_Container] = (),
    overhead: Mapping[str, str] | None = None,
) -> PodRequests:
    """The pod's requests (see the module docstring); amounts that are not positive are left out."""
    total: dict[str, int] = {}
    nonzero_cpu = nonzero_memory = 0
    for container in containers:
        amounts = container_requests(container)
        for name, amount in amounts.items():
            total[name] = total.get(name, 0) + amount
        nonzero_cpu += amounts.get(CPU) or DEFAULT_CPU_MILLI
        nonzero_memory += amounts.get(MEMORY) or DEFAULT_MEMORY_MILLI
    for container in init_containers:
        amounts = container_requests(container)
        for name, amount in amounts.items():
            total[name] = max(total.get(name, 0), amount)
        nonzero_cpu = max(nonzero_cpu, amounts.get(CPU) or DEFAULT_CPU_MILLI)
        nonzero_memory = max(nonzero_memory, amounts.get(MEMORY) or DEFAULT_MEMORY_MILLI)
    for name, value in (overhead or {}).items():
        total[name] = total.get(name, 0) + parse_milli_or_zero(value)
    return PodRequests({k: v for k, v in total.items() if v > 0}, nonzero_cpu, nonzero_memory)


def allocatable_amounts(amounts: Mapping[str, str]) -> Mapping[str, int]:
    """A node's ``status.allocatable`` (or capacity) in milli-units. Nodes that report the
    same amounts get the same (read-only) mapping, so callers may memoize on its identity."""
    return _amounts(tuple(sorted(amounts.items())))


@lru_cache(maxsize=1024)
def _amounts(items: tuple[tuple[str, str], ...]) -> Mapping[str, int]:
    return MappingProxyType({name: parse_milli_or_zero(value) for name, value in items})


def insufficient(
    requests: Mapping[str, int],
    *,
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    pods: int,
) -> tuple[str, ...]:
    """The resources that keep one more pod requesting ``requests`` off the node, in order:
    ``pods`` first when the node is at its pod limit, then each short resource."""
    short: list[str] = []
    if PODS in allocatable and pods + 1 > allocatable[PODS] // MILLI:
        short.append(PODS)
    for resource, amount in requests.items():
        if amount > allocatable.get(resource, 0) - requested.get(resource, 0):
            short.append(resource)
    return tuple(short)


def pods_that_fit(
    requests: Mapping[str, int],
    *,
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    pods: int,
    most: int,
) -> int:
    """How many more pods requesting ``requests`` each fit the node, at most ``most``."""
    fit = most
    if PODS in allocatable:
        fit = min(fit, allocatable[PODS] // MILLI - pods)
    for resource, amount in requests.items():
        if amount > 0:
            fit = min(fit, (allocatable.get(resource, 0) - requested.get(resource, 0)) // amount)
    return max(0, fit)
