"""Kubelet side: calls NodePrepareResources / NodeUnprepareResources on one registered plugin."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from shared.kubeletapi import bindings, convert
from shared.kubeletapi.admission import RegisteredPlugin
from shared.kubeletapi.errors import PluginCallError, PluginNotRegisteredError
from shared.kubeletapi.messages import Claim, PrepareResult, UnprepareResult
from shared.kubeletapi.sockets import unix_address

# The kubelet gives a DRA plugin this long per call before it gives up and retries.
DEFAULT_CALL_TIMEOUT = 45.0


class DraPluginClient:
    """A connection to one registered plugin, in the DRA version chosen at registration.

    Results are keyed by claim UID and hold an entry for every claim asked about: a claim the
    plugin left out gets an error result, which is how the kubelet treats it too. A call that
    fails as a whole raises PluginCallError; a client whose plugin was deregistered raises
    PluginNotRegisteredError, so fetch a fresh client from the watcher for each call.
    """

    def __init__(
        self, plugin: RegisteredPlugin, *, call_timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> None:
        self.plugin = plugin
        self._call_timeout = call_timeout
        self._channel = grpc.aio.insecure_channel(unix_address(plugin.endpoint))
        self._stub = bindings.DraStub(self._channel, plugin.service)
        self._closed = False

    async def wait_connected(self) -> None:
        """Wait until the endpoint accepts a connection (bound it with ``asyncio.timeout``)."""
        await self._channel.channel_ready()

    async def prepare(self, claims: Sequence[Claim]) -> dict[str, PrepareResult]:
        if not claims:
            return {}
        self._check_open()
        try:
            response = await self._stub.node_prepare_resources(
                convert.prepare_request(claims), deadline=self._call_timeout
            )
        except grpc.aio.AioRpcError as exc:
            raise self._call_error(bindings.NODE_PREPARE_RESOURCES, exc) from exc
        results = convert.prepare_results_from_response(response)
        return {
            claim.uid: results[claim.uid]
            if claim.uid in results
            else PrepareResult(error=_left_out(claim))
            for claim in claims
        }

    async def unprepare(self, claims: Sequence[Claim]) -> dict[str, UnprepareResult]:
        if not claims:
            return {}
        self._check_open()
        try:
            response = await self._stub.node_unprepare_resources(
                convert.unprepare_request(claims), deadline=self._call_timeout
            )
        except grpc.aio.AioRpcError as exc:
            raise self._call_error(bindings.NODE_UNPREPARE_RESOURCES, exc) from exc
        results = convert.unprepare_results_from_response(response)
        return {
            claim.uid: results[claim.uid]
            if claim.uid in results
            else UnprepareResult(error=_left_out(claim))
            for claim in claims
        }

    async def close(self, grace: float | None = None) -> None:
        """Close the connection; calls in flight get ``grace`` seconds to finish."""
        self._closed = True
        await self._channel.close(grace)

    def _check_open(self) -> None:
        if self._closed:
            raise PluginNotRegisteredError(self.plugin.driver_name)

    def _call_error(self, method: str, exc: grpc.aio.AioRpcError) -> PluginCallError:
        return PluginCallError(
            driver_name=self.plugin.driver_name,
            method=method,
            code=exc.code().name,
            details=exc.details() or "",
        )


def _left_out(claim: Claim) -> str:
    return f"plugin returned no result for claim {claim.namespace}/{claim.name} ({claim.uid})"
