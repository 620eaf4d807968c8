"""Where the node host learns which nodes have power.

The simulated cluster owns the power switch (``python -m sim power off NODE``, its control API,
or ``SimulatedCluster.power_off`` in process). The node host follows it by reading the power
state of every node, so a node switched off by any of those means loses its hosted services
too, and gets fresh ones when it is switched on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import aiohttp
import msgspec

from shared.errors import CdoError
from sim.kubelet import KubeletFleet


class PowerUnavailableError(CdoError):
    """The power state could not be read (the cluster is not answering)."""


class PowerSource(Protocol):
    async def powered(self) -> Mapping[str, bool]:
        """Node name -> whether the node has power now; PowerUnavailableError if unknown."""
        ...


class FleetPower:
    """The power switches of an in-process cluster's kubelets."""

    def __init__(self, fleet: KubeletFleet) -> None:
        self._fleet = fleet

    async def powered(self) -> Mapping[str, bool]:
        return {kubelet.name: kubelet.powered for kubelet in self._fleet}


class _NodePower(msgspec.Struct, frozen=True):
    name: str
    powered: bool


_NODES = msgspec.json.Decoder(list[_NodePower])


class ClusterPower:
    """The power state ``python -m sim up`` reports on its control API (``GET /nodes``)."""

    def __init__(self, control_url: str, *, timeout_s: float = 5.0) -> None:
        self._url = control_url.rstrip("/") + "/nodes"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def powered(self) -> Mapping[str, bool]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(self._url) as response:
                response.raise_for_status()
                nodes = _NODES.decode(await response.read())
        except (aiohttp.ClientError, TimeoutError, msgspec.DecodeError) as exc:
            raise PowerUnavailableError(f"GET {self._url}: {type(exc).__name__}: {exc}") from exc
        return {node.name: node.powered for node in nodes}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
