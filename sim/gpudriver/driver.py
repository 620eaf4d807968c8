"""The DRA handler of the simulated GPU driver: prepare hands a claim its GPUs through CDI.

Prepare, per claim: a claim already prepared answers from the checkpoint (kubelet retries and
driver restarts get the same answer). Otherwise the claim is read from the API and must be the
one the kubelet named (same uid) and allocated; its allocation results of driver
``gpu.nvidia.com`` in this node's pool name the GPUs (``gpu-<minor>``), each of which must be
one of the node's. The claim is recorded in the checkpoint, then its CDI spec is written: kind
``k8s.gpu.nvidia.com/claim``, one CDI device ``<claim uid>-gpu-<minor>`` per GPU whose edits add
``/dev/nvidia<minor>``. Unprepare removes the spec, then the record; an unknown claim
unprepares successfully. Errors are answered per claim, in words the kubelet shows on the pod.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from shared.crds.names import GPU_DRA_DRIVER
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import ResourceClaim
from shared.kube.resources import RESOURCE_CLAIMS
from shared.kubeletapi import Claim, PreparedDevice, PrepareResult, UnprepareResult
from sim.gpudriver.inventory import GpuRecord

log = logging.getLogger("cdo.sim.gpudriver")

CDI_KIND = f"k8s.{GPU_DRA_DRIVER}/claim"
CDI_VERSION = "0.6.0"

_claim_decoder = msgspec.json.Decoder(ResourceClaim)


class PreparedGpus(msgspec.Struct, frozen=True, kw_only=True):
    """A prepared claim: its GPUs (device names) with the request each serves."""

    devices: tuple[tuple[str, str], ...]
    """(device, request) pairs."""


class _Checkpoint(msgspec.Struct, kw_only=True):
    claims: dict[str, PreparedGpus] = msgspec.field(default_factory=dict)


class ClaimRefusedError(Exception):
    """The claim cannot be prepared here (message for the pod)."""


def cdi_id(claim_uid: str, device: str) -> str:
    return f"{CDI_KIND}={claim_uid}-{device}"


def cdi_spec(claim_uid: str, gpus: Sequence[GpuRecord]) -> dict[str, object]:
    """The claim's CDI spec: one device per GPU, adding its ``/dev/nvidia<minor>``."""
    return {
        "cdiVersion": CDI_VERSION,
        "kind": CDI_KIND,
        "devices": [
            {
                "name": f"{claim_uid}-{gpu.device}",
                "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{gpu.minor}"}]},
            }
            for gpu in gpus
        ],
    }


def _result(claim_uid: str, node: str, prepared: PreparedGpus) -> PrepareResult:
    return PrepareResult(
        devices=tuple(
            PreparedDevice(
                pool_name=node,
                device_name=device,
                cdi_device_ids=(cdi_id(claim_uid, device),),
                request_names=(request,),
            )
            for device, request in prepared.devices
        )
    )


class GpuDriver:
    """Implements :class:`shared.kubeletapi.DraHandler` for one node's GPUs."""

    def __init__(
        self,
        *,
        node: str,
        client: KubeClient,
        gpus: Sequence[GpuRecord],
        checkpoint: Path,
        cdi_root: Path,
    ) -> None:
        self._node = node
        self._client = client
        self._gpus = {gpu.device: gpu for gpu in gpus}
        self._checkpoint = checkpoint
        self._cdi_root = cdi_root
        self._lock = asyncio.Lock()
        self._data = self._load()

    @property
    def prepared(self) -> Mapping[str, PreparedGpus]:
        """Claim uid -> what was prepared for it."""
        return dict(self._data.claims)

    def _load(self) -> _Checkpoint:
        try:
            return msgspec.json.decode(self._checkpoint.read_bytes(), type=_Checkpoint)
        except FileNotFoundError:
            return _Checkpoint()

    def _save(self) -> None:
        self._checkpoint.parent.mkdir(parents=True, exist_ok=True)
        scratch = self._checkpoint.with_suffix(".tmp")
        scratch.write_bytes(msgspec.json.encode(self._data))
        os.replace(scratch, self._checkpoint)

    def spec_path(self, claim_uid: str) -> Path:
        return self._cdi_root / f"k8s.{GPU_DRA_DRIVER}-claim_{claim_uid}.json"

    # -- DraHandler ---------------------------------------------------------------------------

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]:
        return {claim.uid: await self._prepare_one(claim) for claim in claims}

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]:
        results: dict[str, UnprepareResult] = {}
        async with self._lock:
            for claim in claims:
                self.spec_path(claim.uid).unlink(missing_ok=True)
                if self._data.claims.pop(claim.uid, None) is not None:
                    self._save()
                    log.info("GPU claim unprepared", extra={"claim": _name(claim)})
                results[claim.uid] = UnprepareResult()
        return results

    # -- one claim ------------------------------------------------------------------------------

    async def _prepare_one(self, claim: Claim) -> PrepareResult:
        async with self._lock:
            known = self._data.claims.get(claim.uid)
        if known is None:
            try:
                known = await self._resolve(claim)
            except ClaimRefusedError as exc:
                return PrepareResult(error=str(exc))
            except KubeApiError as exc:
                return PrepareResult(error=f"cannot read claim {_name(claim)}: {exc}")
        async with self._lock:
            self._data.claims[claim.uid] = known
            self._save()
            gpus = [self._gpus[device] for device, _ in known.devices]
            self._write_spec(claim.uid, gpus)
        log.info(
            "GPU claim prepared",
            extra={"claim": _name(claim), "devices": [d for d, _ in known.devices]},
        )
        return _result(claim.uid, self._node, known)

    async def _resolve(self, claim: Claim) -> PreparedGpus:
        raw = await self._client.get_or_none(RESOURCE_CLAIMS, claim.name, namespace=claim.namespace)
        if raw is None:
            raise ClaimRefusedError(f"claim {_name(claim)} not found")
        found = _claim_decoder.decode(raw)
        if found.metadata.uid != claim.uid:
            raise ClaimRefusedError(f"claim {_name(claim)} is not the claim with uid {claim.uid}")
        allocation = found.status.allocation
        if allocation is None:
            raise ClaimRefusedError(f"claim {_name(claim)} is not allocated")
        devices: list[tuple[str, str]] = []
        for result in allocation.devices.results:
            if result.driver != GPU_DRA_DRIVER:
                continue
            if result.pool != self._node or result.device not in self._gpus:
                raise ClaimRefusedError(
                    f"claim {_name(claim)} holds {result.pool}/{result.device}, "
                    f"which is not a GPU of node {self._node}"
                )
            devices.append((result.device, result.request))
        return PreparedGpus(devices=tuple(devices))

    def _write_spec(self, claim_uid: str, gpus: Sequence[GpuRecord]) -> None:
        path = self.spec_path(claim_uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(cdi_spec(claim_uid, gpus), indent=2))
        os.replace(scratch, path)


def _name(claim: Claim) -> str:
    return f"{claim.namespace}/{claim.name}"
