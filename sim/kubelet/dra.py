"""Prepares and unprepares a pod's ResourceClaims through the node's DRA kubelet plugins.

For each claim of a pod: read it from the API, check it is allocated and reserved for the pod,
then call NodePrepareResources of every driver in its allocation (claims batched per driver,
one call each) on the plugin the node's PluginWatcher registered. Claims already prepared for
another pod are not prepared again. When the last pod using a claim stops, every driver of the
claim gets NodeUnprepareResources. Failures raise :class:`PrepareError` /
:class:`UnprepareError` with the plugin's words; the caller shows them and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec

from shared.errors import CdoError
from shared.kube.client import KubeClient
from shared.kube.keys import ObjectKey
from shared.kube.models import ResourceClaim
from shared.kube.resources import RESOURCE_CLAIMS
from shared.kubeletapi import Claim, KubeletApiError, PrepareResult, UnprepareResult
from sim.kubelet.checkpoint import Checkpoint, PodClaims, PreparedClaim
from sim.kubelet.claims import (
    ClaimNotUsableError,
    check_usable,
    claim_message,
    claim_names,
    drivers_of,
)
from sim.kubelet.models import Pod

log = logging.getLogger("cdo.sim.kubelet.dra")

_claim_decoder = msgspec.json.Decoder(ResourceClaim)


class PrepareError(CdoError):
    """The pod's claims could not all be prepared; the message is shown on the pod."""


class UnprepareError(CdoError):
    """Some claims could not be unprepared; retried later."""


class DriverClient(Protocol):
    """What the kubelet calls on a driver's plugin (``shared.kubeletapi.DraPluginClient``)."""

    async def prepare(self, claims: Sequence[Claim]) -> dict[str, PrepareResult]: ...

    async def unprepare(self, claims: Sequence[Claim]) -> dict[str, UnprepareResult]: ...


class DraPlugins(Protocol):
    """The node's registered DRA plugins: a ``shared.kubeletapi.PluginWatcher``, or the
    in-process plugins of a hollow node (:mod:`sim.hollow.plugins`)."""

    @property
    def plugins(self) -> Mapping[str, object]: ...

    def client(self, driver_name: str) -> DriverClient: ...


class DraManager:
    """The DRA side of one kubelet session: its plugin watcher and the node's checkpoint."""

    def __init__(self, *, client: KubeClient, watcher: DraPlugins, checkpoint: Checkpoint) -> None:
        self._client = client
        self._watcher = watcher
        self._checkpoint = checkpoint

    def record(self, key: ObjectKey) -> PodClaims | None:
        """What was prepared for the pod at ``key`` (maybe an older pod of that name)."""
        return self._checkpoint.pods.get(key)

    def prepared_device_ids(self, key: ObjectKey, pod_uid: str) -> tuple[str, ...] | None:
        """The CDI ids of the pod when all its claims are prepared already; else None."""
        record = self._checkpoint.pods.get(key)
        if record is None or record.pod_uid != pod_uid:
            return None
        return self._checkpoint.cdi_device_ids(record)

    async def prepare(self, key: ObjectKey, pod: Pod) -> tuple[str, ...]:
        """Prepare every claim of ``pod``; its CDI ids, or PrepareError."""
        async with self._checkpoint.lock:
            try:
                claims = [await self._usable_claim(pod, name) for name in claim_names(pod)]
            except ClaimNotUsableError as exc:
                raise PrepareError(str(exc)) from None
            entries = [self._entry(claim) for claim in claims]
            for entry in entries:
                entry.pod_uids.add(pod.metadata.uid)
            self._checkpoint.pods[key] = PodClaims(
                pod_uid=pod.metadata.uid, claim_uids=tuple(e.claim.uid for e in entries)
            )
            errors = await self._prepare_missing(entries)
            if errors:
                raise PrepareError("; ".join(errors))
            ids = self._checkpoint.cdi_device_ids(self._checkpoint.pods[key])
            assert ids is not None  # every entry is complete when no driver reported an error
            return ids

    async def unprepare(self, key: ObjectKey) -> None:
        """Release the pod at ``key`` from its claims; unprepare those no other pod uses."""
        async with self._checkpoint.lock:
            record = self._checkpoint.pods.get(key)
            if record is None:
                return
            errors: list[str] = []
            for uid in record.claim_uids:
                entry = self._checkpoint.claims.get(uid)
                if entry is None:
                    continue
                entry.pod_uids.discard(record.pod_uid)
                if entry.pod_uids:
                    continue
                failed = await self._unprepare_claim(entry)
                if failed:
                    errors.extend(failed)
                else:
                    del self._checkpoint.claims[uid]
            if errors:
                raise UnprepareError("; ".join(errors))
            del self._checkpoint.pods[key]

    # -- steps ------------------------------------------------------------------------------

    async def _usable_claim(self, pod: Pod, name: str) -> ResourceClaim:
        namespace = pod.metadata.namespace
        raw = await self._client.get_or_none(RESOURCE_CLAIMS, name, namespace=namespace)
        if raw is None:
            raise ClaimNotUsableError(f"resource claim {namespace}/{name} not found")
        claim = _claim_decoder.decode(raw)
        check_usable(claim, pod)
        return claim

    def _entry(self, claim: ResourceClaim) -> PreparedClaim:
        message = claim_message(claim)
        entry = self._checkpoint.claims.get(message.uid)
        if entry is None:
            entry = PreparedClaim(claim=message, drivers=drivers_of(claim))
            self._checkpoint.claims[message.uid] = entry
        return entry

    async def _prepare_missing(self, entries: list[PreparedClaim]) -> list[str]:
        batches: dict[str, list[PreparedClaim]] = {}
        for entry in entries:
            for driver in entry.drivers:
                if driver not in entry.prepared:
                    batches.setdefault(driver, []).append(entry)
        errors: list[str] = []
        for driver, batch in batches.items():
            try:
                results = await self._watcher.client(driver).prepare([e.claim for e in batch])
            except KubeletApiError as exc:
                errors.append(str(exc))
                continue
            for entry in batch:
                result = results[entry.claim.uid]
                if result.ok:
                    entry.prepared[driver] = result.cdi_device_ids
                else:
                    errors.append(f"{_describe(entry.claim)}: {result.error}")
        return errors

    async def _unprepare_claim(self, entry: PreparedClaim) -> list[str]:
        errors: list[str] = []
        for driver in entry.drivers:
            if driver not in entry.prepared and driver not in self._watcher.plugins:
                # Never prepared here and no plugin to ask: nothing can be left to undo.
                continue
            try:
                result = (await self._watcher.client(driver).unprepare([entry.claim]))[
                    entry.claim.uid
                ]
            except KubeletApiError as exc:
                errors.append(str(exc))
                continue
            if result.ok:
                entry.prepared.pop(driver, None)
            else:
                errors.append(f"{_describe(entry.claim)}: {result.error}")
        if not errors:
            log.debug("claim unprepared", extra={"claim": _describe(entry.claim)})
        return errors


def _describe(claim: Claim) -> str:
    return f"claim {claim.namespace}/{claim.name}"
