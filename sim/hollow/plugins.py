"""A hollow node's DRA plugins: the IMEX agent's ``compute-domain.cdo.dev``, in process.

The hollow kubelet calls it where a full node's kubelet calls the agent's kubelet plugin over
gRPC. It prepares every claim at once with the CDI device the agent would answer
(``cdo.dev/imex-channel=<claim uid>``) and unprepares at once; it does not read the claim or
its domain's Placement, writes no channel device and no CDI spec, and never refuses. Which
pods get a channel is what the real agent decides (docs/imex-agent.md); on a hollow node the
kubelet's own checks (the claim allocated, reserved for the pod) are the only ones.
Other drivers (NVIDIA's GPU DRA driver) are not registered on a hollow node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.imex_agent.cdi import device_id
from shared.crds.names import DRIVER_NAME
from shared.kubeletapi import (
    Claim,
    PluginNotRegisteredError,
    PreparedDevice,
    PrepareResult,
    UnprepareResult,
)
from sim.kubelet.dra import DriverClient


class HollowChannelPlugin:
    """``compute-domain.cdo.dev`` on one hollow node; see the module docstring."""

    def __init__(self, node_name: str) -> None:
        self._node_name = node_name
        self.prepared = 0
        """Claims prepared so far (a count, for tests and figures)."""

    async def prepare(self, claims: Sequence[Claim]) -> dict[str, PrepareResult]:
        self.prepared += len(claims)
        return {
            claim.uid: PrepareResult(
                devices=(
                    PreparedDevice(
                        pool_name=self._node_name,
                        device_name="",
                        cdi_device_ids=(device_id(claim.uid),),
                    ),
                )
            )
            for claim in claims
        }

    async def unprepare(self, claims: Sequence[Claim]) -> dict[str, UnprepareResult]:
        return {claim.uid: UnprepareResult() for claim in claims}


class HollowPlugins:
    """The plugins a hollow node's kubelet calls (:class:`sim.kubelet.dra.DraPlugins`)."""

    def __init__(self, node_name: str) -> None:
        self.channel = HollowChannelPlugin(node_name)

    @property
    def plugins(self) -> Mapping[str, object]:
        return {DRIVER_NAME: self.channel}

    def client(self, driver_name: str) -> DriverClient:
        if driver_name != DRIVER_NAME:
            raise PluginNotRegisteredError(driver_name)
        return self.channel
