"""The DRA handler: prepare gives a claim its domain's channel; unprepare takes it back.

Prepare, per claim: if the checkpoint already holds the claim, make sure its device and CDI
spec exist and answer with the recorded CDI ids (kubelet retries and agent restarts get the same
answer, and the same spec, without asking the API or IMEX: the record keeps the pod's slice
seat). Otherwise resolve the channel and seat (:mod:`claims`); then, while the node's IMEX
daemon cannot serve the slice's clique (:func:`readiness.imex_refusal`), wait for the readiness
source's next change, at most ``ready_wait_s`` from the start of the claim's prepare, and fail
the claim with :class:`readiness.ImexNotReadyError` when that time is up (counted as
``result="imex_not_ready"``). After a wait the claim is resolved again (it may have changed
meanwhile). Then record the claim in the checkpoint, create the channel device, write the CDI
spec, and answer; those steps are a span of the domain's trace (see :mod:`shared.tracing.story`).
Unprepare removes the claim's CDI spec, the channel device when no other prepared claim uses
that channel, and then the record. Both are idempotent; an unknown claim unprepares successfully.

At start (:meth:`ChannelDriver.recover`) the files are brought in line with the checkpoint:
devices and specs of recorded claims are made to exist, and specs of ours and channel devices we
made that no recorded claim needs are removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from opentelemetry.trace import Tracer
from opentelemetry.util.types import AnyValue

from services.imex_agent.cdi import CdiStore, ChannelGrant, device_id, render_spec
from services.imex_agent.channels import ChannelDeviceError, ChannelDevices
from services.imex_agent.checkpoint import CheckpointData, CheckpointStore, ClaimRecord
from services.imex_agent.claims import (
    ClaimRefusedError,
    Resolution,
    WithoutChannel,
    refused_error,
)
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.readiness import (
    ImexNotReadyError,
    ReadinessSource,
    imex_refusal,
    not_ready_message,
)
from shared.kube.errors import KubeApiError
from shared.kubeletapi import Claim, PreparedDevice, PrepareResult, UnprepareResult
from shared.tracing.story import story_parent

log = logging.getLogger("cdo.imex_agent.driver")


def _grant(record: ClaimRecord) -> ChannelGrant:
    return ChannelGrant(
        claim_uid=record.uid,
        domain_namespace=record.domain_namespace,
        domain_name=record.domain_name,
        domain_uid=record.domain_uid,
        channel=record.channel,
        seat=record.seat,
    )


def prepare_result(record: ClaimRecord) -> PrepareResult:
    return PrepareResult(
        devices=tuple(
            PreparedDevice(
                pool_name=device.pool,
                device_name=device.device,
                cdi_device_ids=record.cdi_ids,
                request_names=(device.request,),
            )
            for device in record.devices
        )
    )


def without_channel_result(resolution: WithoutChannel) -> PrepareResult:
    """The claim's devices with no CDI device: the containers get nothing of cdo's."""
    return PrepareResult(
        devices=tuple(
            PreparedDevice(
                pool_name=device.pool,
                device_name=device.device,
                cdi_device_ids=(),
                request_names=(device.request,),
            )
            for device in resolution.devices
        )
    )


class Resolver(Protocol):
    """What the driver asks about a claim (:class:`claims.ClaimResolver`)."""

    async def resolve(self, claim: Claim) -> Resolution | WithoutChannel: ...


def slice_clique(resolution: Resolution) -> str | None:
    """The clique of the claim's slice (None for a grant without a seat)."""
    seat = resolution.grant.seat
    return seat.clique if seat is not None else None


class ChannelDriver:
    """Implements :class:`shared.kubeletapi.DraHandler` for one node."""

    def __init__(
        self,
        *,
        node: str,
        resolver: Resolver,
        checkpoint: CheckpointStore,
        devices: ChannelDevices,
        cdi: CdiStore,
        metrics: AgentMetrics,
        readiness: ReadinessSource,
        ready_wait_s: float,
        tracer: Tracer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._tracer = tracer
        self._resolver = resolver
        self._readiness = readiness
        self._ready_wait_s = ready_wait_s
        self._clock = clock
        self._store = checkpoint
        self._devices = devices
        self._cdi = cdi
        self._metrics = metrics
        self._lock = asyncio.Lock()
        self._data: CheckpointData | None = None

    @property
    def data(self) -> CheckpointData:
        if self._data is None:
            raise RuntimeError("recover() has not run yet")
        return self._data

    def recover(self) -> None:
        """Load the checkpoint and bring devices and CDI specs in line with it."""
        data = self._store.load()
        self._data = data
        for record in data.claims.values():
            self._make_files(record)
        used = data.channels_in_use()
        for channel in set(data.channels) - used:
            self._devices.remove(channel)
        data.channels = sorted(used)
        for uid in self._cdi.claim_uids() - set(data.claims):
            self._cdi.remove(uid)
        self._store.save(data)
        log.info(
            "checkpoint loaded",
            extra={"claims": len(data.claims), "channels": sorted(used)},
        )

    def _make_files(self, record: ClaimRecord) -> None:
        self._devices.ensure(record.channel)
        spec = render_spec(_grant(record), major=self._devices.major, host_dir=self._devices.root)
        self._cdi.write(record.uid, spec)

    # -- DraHandler ---------------------------------------------------------------------------

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]:
        results = await asyncio.gather(*(self._prepare_one(claim) for claim in claims))
        return {claim.uid: result for claim, result in zip(claims, results, strict=True)}

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]:
        results: dict[str, UnprepareResult] = {}
        for claim in claims:
            results[claim.uid] = await self._unprepare_one(claim)
        return results

    # -- one claim ------------------------------------------------------------------------------

    async def _prepare_one(self, claim: Claim) -> PrepareResult:
        started = time.perf_counter()
        try:
            result = await self._prepare(claim)
        except ImexNotReadyError as exc:
            self._metrics.dra_requests.labels("prepare", "imex_not_ready").inc()
            log.warning("IMEX not ready", extra={"claim": _name(claim), "error": str(exc)})
            return PrepareResult(error=str(exc))
        except ClaimRefusedError as exc:
            self._metrics.dra_requests.labels("prepare", "refused").inc()
            log.warning(
                "claim refused",
                extra={"claim": _name(claim), "reason": exc.reason, "error": str(exc)},
            )
            return PrepareResult(error=refused_error(exc))
        except (KubeApiError, ChannelDeviceError, OSError) as exc:
            self._metrics.dra_requests.labels("prepare", "error").inc()
            log.warning("prepare failed", extra={"claim": _name(claim), "error": str(exc)})
            return PrepareResult(error=f"prepare failed: {exc}")
        self._metrics.dra_requests.labels("prepare", "ok").inc()
        self._metrics.prepare_seconds.observe(time.perf_counter() - started)
        return result

    async def _prepare(self, claim: Claim) -> PrepareResult:
        started = self._clock()
        async with self._lock:
            record = self.data.claims.get(claim.uid)
            if record is not None:
                self._make_files(record)
                return prepare_result(record)
        resolution = await self._resolver.resolve(claim)
        while (
            isinstance(resolution, Resolution)
            and self._imex_refusal(slice_clique(resolution)) is not None
        ):
            await self._wait_for_imex(claim, slice_clique(resolution), started=started)
            resolution = await self._resolver.resolve(claim)  # what it says after the wait
        if isinstance(resolution, WithoutChannel):
            log.info("claim prepared without a channel", extra={"claim": _name(claim)})
            return without_channel_result(resolution)
        with self._domain_span(claim, resolution):
            return await self._record_and_make(claim, resolution)

    def _imex_refusal(self, clique: str | None) -> str | None:
        return imex_refusal(self._readiness.readiness(), clique=clique)

    async def _wait_for_imex(self, claim: Claim, clique: str | None, *, started: float) -> None:
        """Return once IMEX serves ``clique``; ImexNotReadyError when ``ready_wait_s`` since
        ``started`` pass first. A wait for the readiness source's changes, not a poll."""
        reason = self._imex_refusal(clique)
        log.info("waiting for IMEX", extra={"claim": _name(claim), "reason": reason})
        deadline = started + self._ready_wait_s
        while reason is not None:
            remaining = deadline - self._clock()
            if remaining <= 0:
                waited = self._clock() - started
                raise ImexNotReadyError(
                    not_ready_message(node=self._node, reason=reason, waited_s=waited)
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._readiness.changed()
            reason = self._imex_refusal(clique)
        waited = round(self._clock() - started, 3)
        log.info("IMEX ready", extra={"claim": _name(claim), "waited_s": waited})

    @contextlib.contextmanager
    def _domain_span(self, claim: Claim, resolution: Resolution) -> Iterator[None]:
        """The span of preparing a claim for its domain: part of the domain's trace (or of the
        trace of a fault it goes through), from the annotations its Placement carries."""
        if self._tracer is None:
            yield
            return
        parent, links = story_parent(resolution.story)
        grant = resolution.grant
        attributes: dict[str, AnyValue] = {
            "cdo.domain.namespace": grant.domain_namespace,
            "cdo.domain.name": grant.domain_name,
            "cdo.claim": claim.name,
            "cdo.channel": grant.channel,
        }
        with self._tracer.start_as_current_span(
            "prepare ResourceClaim", context=parent, links=links, attributes=attributes
        ):
            yield

    async def _record_and_make(self, claim: Claim, resolution: Resolution) -> PrepareResult:
        async with self._lock:
            data = self.data
            record = data.claims.get(claim.uid)
            if record is None:
                grant = resolution.grant
                record = ClaimRecord(
                    uid=claim.uid,
                    namespace=claim.namespace,
                    name=claim.name,
                    domain_namespace=grant.domain_namespace,
                    domain_name=grant.domain_name,
                    domain_uid=grant.domain_uid,
                    channel=grant.channel,
                    devices=resolution.devices,
                    cdi_ids=(device_id(claim.uid),),
                    seat=grant.seat,
                )
                # Recorded first: a crash after this leaves files the checkpoint names.
                self._commit(
                    CheckpointData(
                        claims={**data.claims, claim.uid: record},
                        channels=[*data.channels, record.channel],
                    )
                )
                log.info(
                    "claim prepared",
                    extra={
                        "claim": _name(claim),
                        "domain": f"{grant.domain_namespace}/{grant.domain_name}",
                        "channel": grant.channel,
                        "slice": None if grant.seat is None else grant.seat.index,
                        "rank": None if grant.seat is None else grant.seat.rank,
                    },
                )
            self._make_files(record)
            return prepare_result(record)

    async def _unprepare_one(self, claim: Claim) -> UnprepareResult:
        try:
            async with self._lock:
                data = self.data
                record = data.claims.get(claim.uid)
                if record is None:
                    self._cdi.remove(claim.uid)  # a spec a crash left behind
                    self._metrics.dra_requests.labels("unprepare", "ok").inc()
                    return UnprepareResult()
                self._cdi.remove(claim.uid)
                claims = {uid: r for uid, r in data.claims.items() if uid != claim.uid}
                channels = data.channels
                if record.channel not in {r.channel for r in claims.values()}:
                    self._devices.remove(record.channel)
                    channels = [c for c in channels if c != record.channel]
                # Dropped last: a crash before this leaves a record the next unprepare clears.
                self._commit(CheckpointData(claims=claims, channels=channels))
        except OSError as exc:
            self._metrics.dra_requests.labels("unprepare", "error").inc()
            log.warning("unprepare failed", extra={"claim": _name(claim), "error": str(exc)})
            return UnprepareResult(error=f"unprepare failed: {exc}")
        self._metrics.dra_requests.labels("unprepare", "ok").inc()
        log.info("claim unprepared", extra={"claim": _name(claim), "channel": record.channel})
        return UnprepareResult()

    def _commit(self, data: CheckpointData) -> None:
        """Save ``data``, then make it current (a failed save leaves memory as the disk is)."""
        self._store.save(data)
        self._data = data

    def channels_in_use(self) -> set[int]:
        return self.data.channels_in_use()

    def cdi_path(self, claim_uid: str) -> Path:
        return self._cdi.path(claim_uid)


def _name(claim: Claim) -> str:
    return f"{claim.namespace}/{claim.name}"
