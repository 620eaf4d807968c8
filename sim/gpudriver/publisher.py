"""The node's ``gpu.nvidia.com`` ResourceSlice: one device per GPU, kept as the driver wants it.

One slice per node, named ``<node>-gpu.nvidia.com``, pool = the node's name, owned by the Node.
Its devices are :func:`inventory.device_body` of every GPU, with the GPU's current device taints
(:mod:`sim.gpudriver.taints`). The publisher converges the API to that: it creates the slice,
replaces it (pool generation + 1) when its devices differ, and deletes other slices of the
driver for the node; at start, whenever the taints change, and every ``resync_s``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from shared.crds.names import GPU_DRA_DRIVER
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import RESOURCE_SLICES

log = logging.getLogger("cdo.sim.gpudriver")

MANAGED_BY = "sim-gpu-kubelet-plugin"


def slice_name(node: str) -> str:
    return f"{node}-{GPU_DRA_DRIVER}"


def slice_manifest(
    *, node: str, node_uid: str, devices: list[dict[str, Any]], generation: int
) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_SLICES.api_version,
        "kind": RESOURCE_SLICES.kind,
        "metadata": {
            "name": slice_name(node),
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ],
        },
        "spec": {
            "driver": GPU_DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


class _Pool(msgspec.Struct, frozen=True, kw_only=True):
    generation: int = 0


class _Spec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    pool: _Pool = msgspec.field(default_factory=_Pool)
    devices: list[dict[str, Any]] = msgspec.field(default_factory=list)


class _Meta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    resource_version: str = ""


class _Slice(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Meta
    spec: _Spec = msgspec.field(default_factory=_Spec)


class _SliceList(msgspec.Struct, frozen=True, kw_only=True):
    items: tuple[_Slice, ...] = ()


_list_decoder = msgspec.json.Decoder(_SliceList)


class GpuSlicePublisher:
    """Keeps the node's slice equal to ``devices()``; :meth:`poke` after they change."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node: str,
        node_uid: str,
        devices: Callable[[], list[dict[str, Any]]],
        resync_s: float,
    ) -> None:
        self._client = client
        self._node = node
        self._node_uid = node_uid
        self._devices = devices
        self._resync_s = resync_s
        self._wake = asyncio.Event()
        self.published: list[dict[str, Any]] | None = None

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
                log.warning("could not publish the GPU ResourceSlice", extra={"error": str(exc)})
                timeout, pause = pause, min(pause * 2, 30.0)
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def sync(self) -> None:
        """One pass: delete stray slices of the driver for this node, create or update ours."""
        name = slice_name(self._node)
        listing = _list_decoder.decode(
            await self._client.list(
                RESOURCE_SLICES,
                field_selector=f"spec.nodeName={self._node},spec.driver={GPU_DRA_DRIVER}",
            )
        )
        current = None
        for item in listing.items:
            if item.metadata.name == name:
                current = item
            else:
                await self._client.delete(RESOURCE_SLICES, item.metadata.name)
        devices = self._devices()
        if current is None:
            body = slice_manifest(
                node=self._node, node_uid=self._node_uid, devices=devices, generation=0
            )
            await self._client.create(RESOURCE_SLICES, body)
            log.info("GPU ResourceSlice created", extra={"slice": name, "devices": len(devices)})
        elif current.spec.devices != devices:
            body = slice_manifest(
                node=self._node,
                node_uid=self._node_uid,
                devices=devices,
                generation=current.spec.pool.generation + 1,
            )
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            await self._client.replace(RESOURCE_SLICES, name, body)
            log.info("GPU ResourceSlice updated", extra={"slice": name, "devices": len(devices)})
        self.published = devices
