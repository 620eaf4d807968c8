"""Plugin side of the DRA service: the handler a driver implements, and its gRPC adapter."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from shared.kubeletapi import convert
from shared.kubeletapi._generated.dra.v1 import api_pb2 as dra
from shared.kubeletapi.messages import Claim, PrepareResult, UnprepareResult

log = logging.getLogger(__name__)


class DraHandler(Protocol):
    """What a DRA driver implements; the plumbing calls it for every kubelet request.

    Both methods get every claim of one kubelet call and return a result per claim UID. The
    kubelet retries claims that failed or are missing from the result, so both must be
    idempotent. Raising fails every claim of the call with the exception's message; report
    the failure of a single claim through its result instead.
    """

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]: ...

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]: ...


class DraServicer:
    """Adapts a DraHandler to the NodePrepareResources/NodeUnprepareResources methods."""

    def __init__(self, handler: DraHandler, *, driver_name: str) -> None:
        self._handler = handler
        self._driver_name = driver_name

    async def node_prepare_resources(
        self, request: dra.NodePrepareResourcesRequest, _context: Any
    ) -> dra.NodePrepareResourcesResponse:
        claims = convert.claims_from_request(request)
        if not claims:
            return convert.prepare_response({})
        try:
            results = await self._handler.prepare(claims)
        except Exception as exc:
            # The kubelet only shows what comes back per claim, so the cause travels there.
            log.exception("prepare failed", extra=self._log_fields(claims))
            error = f"prepare failed: {_describe(exc)}"
            results = {claim.uid: PrepareResult(error=error) for claim in claims}
        return convert.prepare_response(results)

    async def node_unprepare_resources(
        self, request: dra.NodeUnprepareResourcesRequest, _context: Any
    ) -> dra.NodeUnprepareResourcesResponse:
        claims = convert.claims_from_request(request)
        if not claims:
            return convert.unprepare_response({})
        try:
            results = await self._handler.unprepare(claims)
        except Exception as exc:
            log.exception("unprepare failed", extra=self._log_fields(claims))
            error = f"unprepare failed: {_describe(exc)}"
            results = {claim.uid: UnprepareResult(error=error) for claim in claims}
        return convert.unprepare_response(results)

    def _log_fields(self, claims: Sequence[Claim]) -> dict[str, object]:
        return {"driver": self._driver_name, "claims": [claim.uid for claim in claims]}


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
