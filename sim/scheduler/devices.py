"""Devices published in ResourceSlices, and which of them a node can use.

:func:`slice_devices` turns a slice into :class:`DeviceView` values (attributes keyed by their
qualified name ``domain/name``, a content fingerprint for the selector cache). A
:class:`SliceIndex` keeps every slice and answers, per node, the devices of slices local to the
node (``spec.nodeName``), of slices whose ``spec.nodeSelector`` matches it and of ``allNodes``
slices, using only the newest generation of each pool.
"""

from __future__ import annotations

from typing import Any

import msgspec

from shared.kube.models import DeviceTaint
from sim.scheduler.cel import device_activation
from sim.scheduler.facts import NodeFacts
from sim.scheduler.objects import (
    AttributeValue,
    NodeSelector,
    ResourceSlice,
    attribute_value,
)
from sim.scheduler.selectors import node_selector_matches

DeviceRef = tuple[str, str, str]  # (driver, pool, device)


class DeviceView(msgspec.Struct, frozen=True, kw_only=True):
    driver: str
    pool: str
    name: str
    slice_name: str
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    attributes: dict[str, AttributeValue] = msgspec.field(default_factory=dict)
    capacity: dict[str, str] = msgspec.field(default_factory=dict)
    fingerprint: bytes = b""
    taints: tuple[DeviceTaint, ...] = ()  # the slice's own (DeviceTaintRules come on top)

    @property
    def ref(self) -> DeviceRef:
        return (self.driver, self.pool, self.name)

    def activation(self) -> dict[str, Any]:
        """The CEL ``device`` variable for this device."""
        return device_activation(
            driver=self.driver,
            attributes=_by_domain(self.attributes),
            capacity=_by_domain(self.capacity),
        )


def _by_domain(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for qualified, value in values.items():
        domain, _, name = qualified.rpartition("/")
        out.setdefault(domain, {})[name] = value
    return out


def qualify(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain (the driver's when it has none)."""
    return name if "/" in name else f"{driver}/{name}"


def slice_devices(resource_slice: ResourceSlice) -> tuple[DeviceView, ...]:
    spec = resource_slice.spec
    views: list[DeviceView] = []
    for device in spec.devices:
        attributes: dict[str, AttributeValue] = {}
        for name, attribute in device.attributes.items():
            value = attribute_value(attribute)
            if value is not None:
                attributes[qualify(name, spec.driver)] = value
        capacity = {qualify(name, spec.driver): c.value for name, c in device.capacity.items()}
        views.append(
            DeviceView(
                driver=spec.driver,
                pool=spec.pool.name,
                name=device.name,
                slice_name=resource_slice.metadata.name,
                node_name=spec.node_name,
                node_selector=spec.node_selector,
                all_nodes=spec.all_nodes,
                attributes=attributes,
                capacity=capacity,
                fingerprint=msgspec.json.encode((spec.driver, attributes, capacity)),
                taints=device.taints,
            )
        )
    return tuple(views)


class _Slice(msgspec.Struct, frozen=True, kw_only=True):
    pool: tuple[str, str]
    generation: int
    node_name: str
    node_selector: NodeSelector | None
    all_nodes: bool
    devices: tuple[DeviceView, ...]


class SliceIndex:
    """Every ResourceSlice, indexed for "which devices can this node use"."""

    def __init__(self) -> None:
        self._slices: dict[str, _Slice] = {}
        self._by_node: dict[str, set[str]] = {}
        self._cluster_wide: set[str] = set()
        self._pools: dict[tuple[str, str], dict[str, int]] = {}
        self._per_node: dict[str, tuple[DeviceView, ...]] = {}

    def __len__(self) -> int:
        return len(self._slices)

    def upsert(self, resource_slice: ResourceSlice) -> None:
        name = resource_slice.metadata.name
        self.delete(name)
        spec = resource_slice.spec
        entry = _Slice(
            pool=(spec.driver, spec.pool.name),
            generation=spec.pool.generation,
            node_name=spec.node_name,
            node_selector=spec.node_selector,
            all_nodes=spec.all_nodes,
            devices=slice_devices(resource_slice),
        )
        self._slices[name] = entry
        if entry.node_name:
            self._by_node.setdefault(entry.node_name, set()).add(name)
        elif entry.all_nodes or entry.node_selector is not None:
            self._cluster_wide.add(name)
        self._pools.setdefault(entry.pool, {})[name] = entry.generation
        self._per_node.clear()

    def delete(self, name: str) -> None:
        entry = self._slices.pop(name, None)
        if entry is None:
            return
        if entry.node_name:
            names = self._by_node.get(entry.node_name)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._by_node[entry.node_name]
        self._cluster_wide.discard(name)
        pool = self._pools.get(entry.pool)
        if pool is not None:
            pool.pop(name, None)
            if not pool:
                del self._pools[entry.pool]
        self._per_node.clear()

    def node_changed(self) -> None:
        """Node labels may have changed: forget what was worked out per node."""
        self._per_node.clear()

    def devices_for(self, node: NodeFacts) -> tuple[DeviceView, ...]:
        """The devices ``node`` can use, in a stable order (pool, slice, device)."""
        cached = self._per_node.get(node.name)
        if cached is not None:
            return cached
        names = list(self._by_node.get(node.name, ()))
        for name in self._cluster_wide:
            entry = self._slices[name]
            if entry.all_nodes or (
                entry.node_selector is not None
                and node_selector_matches(entry.node_selector, name=node.name, labels=node.labels)
            ):
                names.append(name)
        chosen: list[tuple[tuple[str, str], str, _Slice]] = []
        for name in names:
            entry = self._slices[name]
            if entry.generation == max(self._pools[entry.pool].values()):
                chosen.append((entry.pool, name, entry))
        chosen.sort(key=lambda item: (item[0], item[1]))
        devices = tuple(device for _, _, entry in chosen for device in entry.devices)
        self._per_node[node.name] = devices
        return devices
