"""A DRA driver's ResourceSlice of one node, kept as the driver wants it.

One slice per node and driver, named ``<node>-<driver>``, pool = the node's name, owned by the
Node (so it goes when the Node goes) and labelled with its manager. :class:`NodeSlicePublisher`
converges the API to the devices its ``devices`` callable returns (device bodies as the API
writes them): it creates the slice, replaces it (pool generation + 1) when its devices differ,
and deletes other slices of the driver for the node; at start, after :meth:`poke` and every
``resync_s``. A failed pass is retried with backoff. Both cdo's IMEX agent (channel attachments)
and the simulated NVIDIA GPU driver (one device per GPU) publish through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import RESOURCE_SLICES

log = logging.getLogger("cdo.kube.nodeslice")

DeviceBody = dict[str, Any]


def slice_name(node: str, driver: str) -> str:
    return f"{node}-{driver}"


def slice_manifest(
    *,
    driver: str,
    node: str,
    node_uid: str,
    devices: list[DeviceBody],
    generation: int,
    managed_by: str,
) -> dict[str, Any]:
    """The slice's manifest."""
    return {
        "apiVersion": RESOURCE_SLICES.api_version,
        "kind": RESOURCE_SLICES.kind,
        "metadata": {
            "name": slice_name(node, driver),
            "labels": {"app.kubernetes.io/managed-by": managed_by},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ],
        },
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


class _Pool(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 1


class _Spec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    driver: str = ""
    node_name: str = ""
    pool: _Pool = msgspec.field(default_factory=_Pool)
    devices: list[DeviceBody] = msgspec.field(default_factory=list)


class _Meta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    resource_version: str = ""


class _Slice(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Meta
    spec: _Spec = msgspec.field(default_factory=_Spec)


class _SliceList(msgspec.Struct, frozen=True, kw_only=True):
    items: tuple[_Slice, ...] = ()


_list_decoder = msgspec.json.Decoder(_SliceList)


def _same_devices(found: list[DeviceBody], wanted: list[DeviceBody]) -> bool:
    """The devices say what ``wanted`` says (fields the server added to them do not count)."""
    return len(found) == len(wanted) and all(
        all(have.get(key) == value for key, value in want.items())
        for have, want in zip(found, wanted, strict=True)
    )


def _current(found: _Slice, *, driver: str, node: str, devices: list[DeviceBody]) -> bool:
    spec = found.spec
    return (
        spec.driver == driver
        and spec.node_name == node
        and spec.pool.name == node
        and spec.pool.resource_slice_count == 1
        and _same_devices(spec.devices, devices)
    )


class NodeSlicePublisher:
    """Keeps ``<node>-<driver>`` equal to ``devices()``; :meth:`poke` after they change."""

    def __init__(
        self,
        client: KubeClient,
        *,
        driver: str,
        node: str,
        node_uid: str,
        devices: Callable[[], list[DeviceBody]],
        resync_s: float,
        managed_by: str,
    ) -> None:
        self._client = client
        self._driver = driver
        self._node = node
        self._node_uid = node_uid
        self._devices = devices
        self._resync_s = resync_s
        self._managed_by = managed_by
        self._wake = asyncio.Event()
        self.published: list[DeviceBody] | None = None

    def poke(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        pause = 0.2
        while True:
            self._wake.clear()
            try:
                await self.sync()
                pause, timeout = 0.2, self._resync_s
            except KubeApiError as exc:
                log.warning(
                    "could not publish the ResourceSlice",
                    extra={"driver": self._driver, "error": str(exc)},
                )
                timeout, pause = pause, min(pause * 2, 30.0)
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _manifest(self, devices: list[DeviceBody], generation: int) -> dict[str, Any]:
        return slice_manifest(
            driver=self._driver,
            node=self._node,
            node_uid=self._node_uid,
            devices=devices,
            generation=generation,
            managed_by=self._managed_by,
        )

    async def sync(self) -> None:
        """One pass: delete stray slices of the driver for this node, create or update ours."""
        name = slice_name(self._node, self._driver)
        listing = _list_decoder.decode(
            await self._client.list(
                RESOURCE_SLICES,
                field_selector=f"spec.nodeName={self._node},spec.driver={self._driver}",
            )
        )
        current: _Slice | None = None
        for item in listing.items:
            if item.metadata.name == name:
                current = item
            else:
                await self._client.delete(RESOURCE_SLICES, item.metadata.name)
        devices = self._devices()
        if current is None:
            try:
                await self._client.create(RESOURCE_SLICES, self._manifest(devices, 0))
            except KubeApiError as exc:
                if not exc.already_exists:
                    raise
                await self.sync()  # somebody made it meanwhile: compare with theirs
                return
            log.info("ResourceSlice created", extra={"slice": name, "devices": len(devices)})
        elif not _current(current, driver=self._driver, node=self._node, devices=devices):
            body = self._manifest(devices, current.spec.pool.generation + 1)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            await self._client.replace(RESOURCE_SLICES, name, body)
            log.info("ResourceSlice updated", extra={"slice": name, "devices": len(devices)})
        self.published = devices
