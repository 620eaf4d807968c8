"""Dynamic Resource Allocation: choosing devices for a pod's ResourceClaims on one node.

For each claim that is not allocated yet, every request (``exactly``, or the first of its
``firstAvailable`` subrequests that can be satisfied) gets devices that:

- belong to a slice the node can use (see :mod:`sim.scheduler.devices`);
- pass every CEL selector of the request's DeviceClass and of the request itself;
- are not allocated to another claim, nor chosen for an earlier request or claim of this pod;
- keep every ``matchAttribute`` constraint of the claim (same value on all devices it covers);
- carry no NoSchedule or NoExecute device taint (the slice's, or a matching DeviceTaintRule's,
  :mod:`sim.scheduler.devicetaints`) that the request's ``tolerations`` do not tolerate.

``ExactCount`` takes ``count`` devices; ``All`` takes every matching device and fails if any of
them is in use or there is none. The search backtracks over requests, subrequests and device
combinations (bounded by a step budget), so a broad request does not starve a narrow one.

A claim that is already allocated is reused when its allocation's node selector admits the node.
Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping, Sequence

import msgspec

from shared.kube.models import DeviceTaintRule, Toleration
from sim.scheduler.cel import SelectorCache, compile_error, evaluate
from sim.scheduler.devices import DeviceRef, DeviceView
from sim.scheduler.devicetaints import blocks_allocation, device_taints
from sim.scheduler.facts import NodeFacts
from sim.scheduler.objects import (
    AllocationResult,
    AttributeValue,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    NodeSelector,
    ResourceClaim,
)
from sim.scheduler.selectors import node_name_selector, node_selector_matches

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"
SEARCH_BUDGET = 10_000


class _Choice(msgspec.Struct, frozen=True, kw_only=True):
    """One way to satisfy a request: a subrequest, or the request itself."""

    result_name: str  # "<request>" or "<request>/<subrequest>"
    device_class: str
    selectors: tuple[DeviceSelector, ...]
    all_devices: bool
    count: int
    tolerations: tuple[Toleration, ...] = ()


class ClaimAllocation(msgspec.Struct, frozen=True, kw_only=True):
    """A claim of the pod and what scheduling it on the node means for it.

    ``allocation`` is the new allocation to write, or None when the claim was allocated before
    and is only reused.
    """

    claim: ResourceClaim
    allocation: AllocationResult | None
    devices: tuple[DeviceRef, ...] = ()


def _choices(request: DeviceRequest) -> list[_Choice]:
    if request.exactly is not None:
        exact = request.exactly
        return [
            _Choice(
                result_name=request.name,
                device_class=exact.device_class_name,
                selectors=exact.selectors,
                all_devices=exact.allocation_mode == "All",
                count=exact.count,
                tolerations=exact.tolerations,
            )
        ]
    return [
        _Choice(
            result_name=f"{request.name}/{sub.name}",
            device_class=sub.device_class_name,
            selectors=sub.selectors,
            all_devices=sub.allocation_mode == "All",
            count=sub.count,
            tolerations=sub.tolerations,
        )
        for sub in request.first_available
    ]


def claim_problems(claim: ResourceClaim, classes: Mapping[str, DeviceClass]) -> list[str]:
    """What makes a claim impossible on every node: a missing DeviceClass, a selector that does
    not compile, a request without anything to satisfy it."""
    problems: list[str] = []
    if claim.status.allocation is not None:
        return problems
    for request in claim.spec.devices.requests:
        choices = _choices(request)
        if not choices:
            problems.append(f"request {request.name}: no device request")
        for choice in choices:
            device_class = classes.get(choice.device_class)
            if device_class is None:
                problems.append(
                    f"request {choice.result_name}: device class {choice.device_class} "
                    "does not exist"
                )
                continue
            for selector in (*device_class.spec.selectors, *choice.selectors):
                if selector.cel is not None:
                    error = compile_error(selector.cel.expression)
                    if error:
                        problems.append(f"request {choice.result_name}: selector {error}")
    return problems


def _selects(selector: DeviceSelector, device: DeviceView, cache: SelectorCache) -> bool:
    if selector.cel is None:
        return True
    expression = selector.cel.expression
    outcome = cache.get(expression, device.fingerprint)
    if outcome is None:
        outcome = evaluate(expression, device.activation())
        cache.put(expression, device.fingerprint, outcome)
    return outcome.matched


class _Search:
    """Backtracking over the pod's unallocated claims, one request after another."""

    def __init__(
        self,
        *,
        devices: Sequence[DeviceView],
        classes: Mapping[str, DeviceClass],
        in_use: Collection[DeviceRef],
        cache: SelectorCache,
        rules: Sequence[DeviceTaintRule] = (),
        honour_taints: bool = True,
    ) -> None:
        self._devices = devices
        self._rules = rules
        self._honour_taints = honour_taints
        self._classes = classes
        self._in_use = in_use
        self._cache = cache
        self._matching: dict[_Choice, list[DeviceView]] = {}
        self.steps = 0

    def matching(self, choice: _Choice) -> list[DeviceView]:
        """Devices of the node that the choice's class and selectors select (in use or not)."""
        found = self._matching.get(choice)
        if found is None:
            device_class = self._classes.get(choice.device_class)
            selectors = (
                (*device_class.spec.selectors, *choice.selectors)
                if device_class is not None
                else None
            )
            found = (
                []
                if selectors is None
                else [
                    d
                    for d in self._devices
                    if all(_selects(s, d, self._cache) for s in selectors)
                    and not self._tainted(d, choice.tolerations)
                ]
            )
            self._matching[choice] = found
        return found

    def _tainted(self, device: DeviceView, tolerations: Sequence[Toleration]) -> bool:
        """A device with an untolerated NoSchedule/NoExecute taint is not allocated (where the
        release honours device taints)."""
        if not self._honour_taints or (not device.taints and not self._rules):
            return False
        taints = device_taints(
            device.taints, self._rules, driver=device.driver, pool=device.pool, device=device.name
        )
        return blocks_allocation(taints, tolerations) is not None

    def _picks(self, choice: _Choice, taken: set[DeviceRef]) -> Iterator[tuple[DeviceView, ...]]:
        matching = self.matching(choice)
        if choice.all_devices:
            if matching and not any(d.ref in self._in_use or d.ref in taken for d in matching):
                yield tuple(matching)
            return
        free = [d for d in matching if d.ref not in self._in_use and d.ref not in taken]
        if choice.count <= 0 or len(free) < choice.count:
            return
        yield from itertools.combinations(free, choice.count)

    def solve(
        self,
        requests: Sequence[tuple[str, list[_Choice]]],
        constraints: Sequence[DeviceConstraint],
        taken: set[DeviceRef],
    ) -> list[tuple[str, DeviceView]] | None:
        chosen: list[tuple[str, DeviceView]] = []

        def step(index: int) -> bool:
            if index == len(requests):
                return True
            _, choices = requests[index]
            for choice in choices:
                for picks in self._picks(choice, taken):
                    self.steps += 1
                    if self.steps > SEARCH_BUDGET:
                        return False
                    added = [(choice.result_name, d) for d in picks]
                    if not _constraints_hold(constraints, chosen, added):
                        continue
                    chosen.extend(added)
                    taken.update(d.ref for d in picks)
                    if step(index + 1):
                        return True
                    del chosen[len(chosen) - len(added) :]
                    taken.difference_update(d.ref for d in picks)
            return False

        return chosen if step(0) else None


def _covers(constraint: DeviceConstraint, result_name: str) -> bool:
    if not constraint.requests:
        return True
    request = result_name.split("/", 1)[0]
    return result_name in constraint.requests or request in constraint.requests


def _constraints_hold(
    constraints: Sequence[DeviceConstraint],
    chosen: Sequence[tuple[str, DeviceView]],
    added: Sequence[tuple[str, DeviceView]],
) -> bool:
    for constraint in constraints:
        attribute = constraint.match_attribute
        if not attribute:
            continue
        covered = [d for name, d in added if _covers(constraint, name)]
        if not covered:
            continue
        values: set[AttributeValue | None] = {d.attributes.get(attribute) for d in covered}
        values.update(
            d.attributes.get(attribute) for name, d in chosen if _covers(constraint, name)
        )
        if None in values or len(values) > 1:
            return False
    return True


def _allocation_node_selector(node: NodeFacts, picked: Sequence[DeviceView]) -> NodeSelector | None:
    if not picked or all(d.all_nodes for d in picked):
        return None
    selectors = {
        msgspec.json.encode(d.node_selector) for d in picked if d.node_selector is not None
    }
    if any(d.node_name for d in picked) or len(selectors) != 1:
        return node_name_selector(node.name)
    return next(d.node_selector for d in picked if d.node_selector is not None)


def _config(
    claim: ResourceClaim, classes: Mapping[str, DeviceClass], results: Sequence[tuple[str, str]]
) -> tuple[DeviceAllocationConfiguration, ...]:
    """Class configuration for each request, then the claim's own, as kube-scheduler records
    them (``results`` pairs a result's request name with its device class)."""
    out: list[DeviceAllocationConfiguration] = []
    seen: set[tuple[str, str]] = set()
    for request_name, class_name in results:
        if (request_name, class_name) in seen:
            continue
        seen.add((request_name, class_name))
        device_class = classes.get(class_name)
        for entry in device_class.spec.config if device_class is not None else ():
            out.append(
                DeviceAllocationConfiguration(
                    source="FromClass", requests=(request_name,), opaque=entry.opaque
                )
            )
    for claim_entry in claim.spec.devices.config:
        out.append(
            DeviceAllocationConfiguration(
                source="FromClaim", requests=claim_entry.requests, opaque=claim_entry.opaque
            )
        )
    return tuple(out)


def allocate_on_node(
    claims: Sequence[ResourceClaim],
    *,
    node: NodeFacts,
    devices: Sequence[DeviceView],
    classes: Mapping[str, DeviceClass],
    in_use: Collection[DeviceRef],
    cache: SelectorCache,
    rules: Sequence[DeviceTaintRule] = (),
    honour_taints: bool = True,
) -> tuple[ClaimAllocation, ...] | str:
    """What the pod's ``claims`` get on ``node``, or the reason they cannot be met there;
    ``honour_taints`` False: device taints count for nothing (DRADeviceTaints off)."""
    out: list[ClaimAllocation] = []
    taken: set[DeviceRef] = set()
    search = _Search(
        devices=devices,
        classes=classes,
        in_use=in_use,
        cache=cache,
        rules=rules,
        honour_taints=honour_taints,
    )
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is not None:
            selector = allocation.node_selector
            if selector is not None and not node_selector_matches(
                selector, name=node.name, labels=node.labels
            ):
                return NOT_ON_NODE
            out.append(ClaimAllocation(claim=claim, allocation=None))
            continue
        requests = [(r.name, _choices(r)) for r in claim.spec.devices.requests]
        chosen = search.solve(requests, claim.spec.devices.constraints, taken)
        if chosen is None:
            return CANNOT_ALLOCATE
        classes_by_result = {c.result_name: c.device_class for _, cs in requests for c in cs}
        results = tuple(
            DeviceRequestAllocationResult(request=name, driver=d.driver, pool=d.pool, device=d.name)
            for name, d in chosen
        )
        out.append(
            ClaimAllocation(
                claim=claim,
                allocation=AllocationResult(
                    devices=DeviceAllocationResult(
                        results=results,
                        config=_config(
                            claim,
                            classes,
                            [(name, classes_by_result[name]) for name, _ in chosen],
                        ),
                    ),
                    node_selector=_allocation_node_selector(node, [d for _, d in chosen]),
                ),
                devices=tuple(d.ref for _, d in chosen),
            )
        )
    return tuple(out)
