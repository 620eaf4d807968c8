"""The node's ResourceSlice of channel-attachment devices.

One slice per node, named ``<node>-compute-domain.cdo.dev``, pool = the node's name, owned by
the Node (so it goes when the Node goes). It lists ``attach-0`` .. ``attach-<N-1>``; the
scheduler allocates one to each pod claim of a domain on the node, and prepare maps the claim to
its domain's channel, so N bounds the pods with a channel on the node at once. Each device
carries the attributes ``clique`` (the node's NVLink clique), ``node`` and ``index``. A node
whose clique is unknown or lost publishes the slice with no devices: no pod that needs a channel
can be placed there. A node on no NVLink fabric at all (clique ``""``, as NVIDIA's cliqueID
reads there) lists the devices without ``clique``: pods of a domain that runs without IMEX use
them, and get no channel. The desired slice is a pure function; :class:`SlicePublisher`
converges the API to it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec

from services.imex_agent.names import ATTACHMENT_PREFIX
from shared.crds.names import DRIVER_NAME
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.meta import ListMeta
from shared.kube.models import Device, DeviceAttribute, ResourceSlice
from shared.kube.resources import RESOURCE_SLICES

log = logging.getLogger("cdo.imex_agent.resourceslice")


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER_NAME}"


def desired_devices(*, node: str, clique: str | None, attachments: int) -> tuple[Device, ...]:
    """The slice's devices; ``clique`` None: none, "": the node is on no NVLink fabric."""
    if clique is None:
        return ()
    in_clique = {"clique": DeviceAttribute(string=clique)} if clique else {}
    return tuple(
        Device(
            name=f"{ATTACHMENT_PREFIX}{index}",
            attributes={
                **in_clique,
                "node": DeviceAttribute(string=node),
                "index": DeviceAttribute(integer=index),
            },
        )
        for index in range(attachments)
    )


def desired_slice(
    *, node: str, node_uid: str, clique: str | None, attachments: int, generation: int
) -> dict[str, Any]:
    """The slice's manifest."""
    devices = desired_devices(node=node, clique=clique, attachments=attachments)
    return {
        "apiVersion": RESOURCE_SLICES.api_version,
        "kind": RESOURCE_SLICES.kind,
        "metadata": {
            "name": slice_name(node),
            "labels": {"app.kubernetes.io/managed-by": "cdo-imex-agent"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ],
        },
        "spec": {
            "driver": DRIVER_NAME,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [_device_body(device) for device in devices],
        },
    }


def _device_body(device: Device) -> dict[str, Any]:
    # Only the value a DeviceAttribute holds; the API rejects attributes with several.
    attributes = {
        name: {key: value for key, value in msgspec.to_builtins(attr).items() if value is not None}
        for name, attr in device.attributes.items()
    }
    return {"name": device.name, "attributes": attributes}


def slice_current(current: ResourceSlice, *, node: str, devices: tuple[Device, ...]) -> bool:
    spec = current.spec
    return (
        spec.driver == DRIVER_NAME
        and spec.node_name == node
        and spec.pool.name == node
        and spec.pool.resource_slice_count == 1
        and spec.devices == devices
    )


class _SliceList(msgspec.Struct, frozen=True, kw_only=True):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: tuple[ResourceSlice, ...] = ()


_list_decoder = msgspec.json.Decoder(_SliceList)


class SlicePublisher:
    """Keeps the node's slice as desired: at start, on clique changes and every resync."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node: str,
        node_uid: str,
        attachments: int,
        resync_s: float,
    ) -> None:
        self._client = client
        self._node = node
        self._node_uid = node_uid
        self._attachments = attachments
        self._resync_s = resync_s
        self._clique: str | None = None
        self._wake = asyncio.Event()
        self.published: tuple[Device, ...] | None = None

    def set_clique(self, clique: str | None) -> None:
        if clique != self._clique:
            self._clique = clique
            self._wake.set()

    async def run(self) -> None:
        pause = 0.2
        while True:
            self._wake.clear()
            try:
                await self.sync()
                pause = 0.2
                timeout = self._resync_s
            except KubeApiError as exc:
                log.warning("could not publish the ResourceSlice", extra={"error": str(exc)})
                timeout = pause
                pause = min(pause * 2, 30.0)
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def sync(self) -> None:
        """One pass: delete stray slices of ours for this node, create or update ours."""
        name = slice_name(self._node)
        listing = _list_decoder.decode(
            await self._client.list(
                RESOURCE_SLICES,
                field_selector=f"spec.nodeName={self._node},spec.driver={DRIVER_NAME}",
            )
        )
        current: ResourceSlice | None = None
        for item in listing.items:
            if item.metadata.name == name:
                current = item
            else:
                await self._client.delete(RESOURCE_SLICES, item.metadata.name)
        devices = desired_devices(
            node=self._node, clique=self._clique, attachments=self._attachments
        )
        if current is None:
            body = desired_slice(
                node=self._node,
                node_uid=self._node_uid,
                clique=self._clique,
                attachments=self._attachments,
                generation=0,
            )
            try:
                await self._client.create(RESOURCE_SLICES, body)
            except KubeApiError as exc:
                if not exc.already_exists:
                    raise
                await self.sync()  # somebody made it meanwhile: compare with theirs
                return
            log.info("ResourceSlice created", extra={"slice": name, "devices": len(devices)})
        elif not slice_current(current, node=self._node, devices=devices):
            body = desired_slice(
                node=self._node,
                node_uid=self._node_uid,
                clique=self._clique,
                attachments=self._attachments,
                generation=current.spec.pool.generation + 1,
            )
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            await self._client.replace(RESOURCE_SLICES, name, body)
            log.info("ResourceSlice updated", extra={"slice": name, "devices": len(devices)})
        self.published = devices
