"""Registers the kubelet's Node, renews its Lease and reports its status.

- Registration creates the Node (labels, capacity, addresses, Ready); a Node that exists
  already gets the kubelet's labels merged in and its status reported, as a restarted kubelet
  does. It is retried until it succeeds.
- The heartbeat is the Lease ``kube-node-lease/<node>`` (holder the node, owned by the Node),
  renewed every ``heartbeat_interval_s``; failures retry sooner, like the kubelet's.
- Status is computed every ``status_update_interval_s`` and whenever the Node changes, and
  patched only when it differs from what the Node says (a lifecycle controller marked it
  Unknown, say) or ``status_report_interval_s`` has passed since the last report.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer
from shared.kube.resources import LEASES, NODES
from sim.kubelet import names, nodeobject
from sim.kubelet.devices import DeviceManager
from sim.kubelet.models import Node
from sim.kubelet.settings import KubeletSettings
from sim.kubelet.timefmt import micro_time, utcnow
from sim.topology import Node as TopologyNode

log = logging.getLogger("cdo.sim.kubelet.node")

_node_decoder = msgspec.json.Decoder(Node)
_RETRY_FIRST_S = 0.2


class NodeAgent:
    """The Node-facing half of one kubelet session; see the module docstring."""

    def __init__(
        self,
        *,
        node: TopologyNode,
        client: KubeClient,
        settings: KubeletSettings,
        labels: Mapping[str, str],
        nodes: Informer[Node],
        devices: DeviceManager,
        status_changed: asyncio.Event,
    ) -> None:
        self._node = node
        self._devices = devices
        self._client = client
        self._settings = settings
        self._labels = dict(labels)
        self._nodes = nodes
        self._node_uid = ""
        self._changed = status_changed  # set by the Node's changes and the devices' health
        self._last_report = float("-inf")
        nodes.add_handler(lambda _old, _new: self._changed.set())

    async def run(self) -> None:
        """Register, then heartbeat and report status until cancelled."""
        await self._retrying("register node", self._register)
        async with asyncio.TaskGroup() as group:
            group.create_task(self._heartbeat())
            group.create_task(self._report_status())

    # -- registration -------------------------------------------------------------------------

    async def _register(self) -> None:
        body = nodeobject.registration_body(
            self._node,
            self._settings,
            labels=self._labels,
            now=utcnow(),
            gpus=self._devices.counts(),
        )
        try:
            created = _node_decoder.decode(await self._client.create(NODES, body))
        except KubeApiError as exc:
            if not exc.already_exists:
                raise
            patch = {"metadata": {"labels": body["metadata"]["labels"]}}
            created = _node_decoder.decode(await self._client.patch(NODES, self._node.name, patch))
            self._last_report = float("-inf")
            log.info("node registered again", extra={"node": self._node.name})
        else:
            self._last_report = time.monotonic()
            log.info("node registered", extra={"node": self._node.name})
        self._node_uid = created.metadata.uid

    # -- lease --------------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        failures = 0
        while True:
            try:
                await self._renew()
                failures = 0
                pause = self._settings.heartbeat_interval_s
            except KubeApiError as exc:
                if not (exc.retryable or exc.conflict or exc.not_found or exc.already_exists):
                    raise
                failures += 1
                pause = min(self._settings.heartbeat_interval_s, _RETRY_FIRST_S * 2**failures)
                log.warning(
                    "could not renew node lease",
                    extra={"node": self._node.name, "error": str(exc), "pause_s": pause},
                )
            await asyncio.sleep(pause)

    async def _renew(self) -> None:
        name = self._node.name
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": self._settings.lease_duration_s,
            "renewTime": micro_time(utcnow()),
        }
        try:
            await self._client.patch(
                LEASES, name, {"spec": spec}, namespace=names.NODE_LEASE_NAMESPACE
            )
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            await self._client.create(
                LEASES, self._lease_body(spec), namespace=names.NODE_LEASE_NAMESPACE
            )

    def _lease_body(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self._node.name}
        if self._node_uid:
            metadata["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": self._node.name, "uid": self._node_uid}
            ]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": dict(spec),
        }

    # -- status -------------------------------------------------------------------------------

    async def _report_status(self) -> None:
        await self._nodes.wait_synced()
        while True:
            self._changed.clear()
            await self._retrying("report node status", self._sync_status)
            try:
                async with asyncio.timeout(self._settings.status_update_interval_s):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _sync_status(self) -> None:
        current = self._nodes.cache.get(self._node.name)
        if current is None:
            # The cache may predate registration; ask the server before registering again.
            raw = await self._client.get_or_none(NODES, self._node.name)
            if raw is None:
                await self._register()
                return
            current = _node_decoder.decode(raw)
        self._node_uid = current.metadata.uid
        if not nodeobject.labels_are_current(current, self._node, self._settings, self._labels):
            labels = nodeobject.node_labels(self._node, self._settings, self._labels)
            await self._client.patch(NODES, self._node.name, {"metadata": {"labels": labels}})
        due = time.monotonic() - self._last_report >= self._settings.status_report_interval_s
        gpus = self._devices.counts()
        current_enough = nodeobject.status_is_current(
            current, self._node, self._settings, gpus=gpus
        )
        if not due and current_enough:
            return
        status = nodeobject.status_body(
            self._node,
            self._settings,
            now=utcnow(),
            previous=current.status.conditions,
            gpus=gpus,
        )
        await self._client.patch(
            NODES,
            self._node.name,
            {"metadata": {"uid": current.metadata.uid}, "status": status},
            subresource="status",
            patch_type="strategic",
        )
        self._last_report = time.monotonic()

    async def _retrying(self, what: str, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` until it succeeds, pausing longer after each retryable failure."""
        pause = _RETRY_FIRST_S
        while True:
            try:
                await step()
                return
            except KubeApiError as exc:
                if not (exc.retryable or exc.conflict or exc.not_found):
                    raise
                log.warning(
                    "%s failed; retrying",
                    what,
                    extra={"node": self._node.name, "error": str(exc), "pause_s": pause},
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, self._settings.status_update_interval_s)
