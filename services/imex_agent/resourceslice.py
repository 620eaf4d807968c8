"""The node's ResourceSlice of channel-attachment devices.

One slice per node, named ``<node>-compute-domain.cdo.dev``, pool = the node's name, owned by
the Node (so it goes when the Node goes). It lists ``attach-0`` .. ``attach-<N-1>``; the
scheduler allocates one to each pod claim of a domain on the node, and prepare maps the claim to
its domain's channel, so N bounds the pods with a channel on the node at once. Each device
carries the attributes ``clique`` (the node's NVLink clique), ``node`` and ``index``. A node
whose clique is unknown or lost publishes the slice with no devices: no pod that needs a channel
can be placed there. A node on no NVLink fabric at all (clique ``""``, as NVIDIA's cliqueID
reads there) lists the devices without ``clique``: pods of a domain that runs without IMEX use
them, and get no channel. The desired devices are a pure function; :class:`SlicePublisher`
converges the API to them through :class:`shared.kube.nodeslice.NodeSlicePublisher`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from services.imex_agent.names import ATTACHMENT_PREFIX
from shared.crds.names import DRIVER_NAME
from shared.kube.client import KubeClient
from shared.kube.models import Device, DeviceAttribute
from shared.kube.nodeslice import NodeSlicePublisher, slice_manifest
from shared.kube.nodeslice import slice_name as driver_slice_name

MANAGED_BY = "cdo-imex-agent"


def slice_name(node: str) -> str:
    return driver_slice_name(node, DRIVER_NAME)


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


def device_body(device: Device) -> dict[str, Any]:
    # Only the value a DeviceAttribute holds; the API rejects attributes with several.
    attributes = {
        name: {key: value for key, value in msgspec.to_builtins(attr).items() if value is not None}
        for name, attr in device.attributes.items()
    }
    return {"name": device.name, "attributes": attributes}


def desired_slice(
    *, node: str, node_uid: str, clique: str | None, attachments: int, generation: int
) -> dict[str, Any]:
    """The slice's manifest."""
    devices = desired_devices(node=node, clique=clique, attachments=attachments)
    return slice_manifest(
        driver=DRIVER_NAME,
        node=node,
        node_uid=node_uid,
        devices=[device_body(device) for device in devices],
        generation=generation,
        managed_by=MANAGED_BY,
    )


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
        self._node = node
        self._attachments = attachments
        self._clique: str | None = None
        self._publisher = NodeSlicePublisher(
            client,
            driver=DRIVER_NAME,
            node=node,
            node_uid=node_uid,
            devices=self._bodies,
            resync_s=resync_s,
            managed_by=MANAGED_BY,
        )

    def _bodies(self) -> list[dict[str, Any]]:
        devices = desired_devices(
            node=self._node, clique=self._clique, attachments=self._attachments
        )
        return [device_body(device) for device in devices]

    @property
    def published(self) -> list[dict[str, Any]] | None:
        return self._publisher.published

    def set_clique(self, clique: str | None) -> None:
        if clique != self._clique:
            self._clique = clique
            self._publisher.poke()

    async def run(self) -> None:
        await self._publisher.run()

    async def sync(self) -> None:
        await self._publisher.sync()
