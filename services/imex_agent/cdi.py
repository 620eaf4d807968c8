"""CDI specs for prepared claims: one spec file per claim (rendering is pure).

Each prepared claim gets ``<cdi root>/cdo.dev-imex-channel_<claim uid>.json``, a CDI spec of
kind ``cdo.dev/imex-channel`` (CDI 0.6.0) with one device named after the claim's uid. Its
container edits add the channel device node of the pod's slice (type, major and minor given,
host path the agent's device root) and environment naming the domain, the channel, the slice
and the pod's ranks, plus NVIDIA's four variables under NVIDIA's names (:func:`grant_env`). The
kubelet hands the device id ``cdo.dev/imex-channel=<claim uid>`` to the container runtime, which
applies the edits. A pod that asks for no GPU holds no rank: its environment has no rank
variables. One file per claim keeps a claim's unprepare to one file removal, and the uid
keeps device names unique across every spec of the kind, as CDI requires. Rendering is a pure
function of the grant: the same grant always gives the same bytes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from services.imex_agent.files import remove, write_bytes_if_changed
from services.imex_agent.names import (
    CDI_FILE_PREFIX,
    CDI_KIND,
    CDI_VERSION,
    CHANNEL_CONTAINER_DIR,
    ENV_CHANNEL,
    ENV_CLIQUE,
    ENV_DOMAIN,
    ENV_DOMAIN_UID,
    ENV_RANK,
    ENV_SLICE_INDEX,
    ENV_SLICE_RANK,
    ENV_SLICE_SIZE,
    NVIDIA_ENV_CLIQUE,
    NVIDIA_ENV_DOMAIN_NAME,
    NVIDIA_ENV_DOMAIN_NAMESPACE,
    NVIDIA_ENV_DOMAIN_UID,
)

_DEVICE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.:-]*$")


class DeviceNode(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    path: str
    host_path: str
    type: str
    major: int
    minor: int
    permissions: str


class ContainerEdits(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()


class CdiDevice(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    container_edits: ContainerEdits


class CdiSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    cdi_version: str
    kind: str
    devices: tuple[CdiDevice, ...]


class SliceSeat(msgspec.Struct, frozen=True, kw_only=True):
    """Where the claim's pod sits in its domain: its slice and its ranks."""

    clique: str
    """The slice's clique, ``<cluster UUID>.<clique id>``."""
    index: int
    """The slice's index in the Placement."""
    size: int
    """Ranks the slice covers."""
    rank: int | None = None
    """The pod's rank in the gang; None for a pod that asks for no GPU (it holds no rank)."""
    slice_rank: int | None = None
    """The pod's rank in the slice: ``rank`` minus the slice's first rank (None with it)."""


class ChannelGrant(msgspec.Struct, frozen=True, kw_only=True):
    """What one claim is given: the channel of its pod's slice, and where the pod sits."""

    claim_uid: str
    domain_namespace: str
    domain_name: str
    domain_uid: str
    channel: int
    seat: SliceSeat | None = None
    """None only for a claim the previous release prepared (its checkpoint record has no
    seat): such a claim keeps the environment it was given then."""


def grant_env(grant: ChannelGrant) -> tuple[str, ...]:
    """The containers' environment for ``grant``, in a fixed order."""
    domain = (
        f"{ENV_DOMAIN}={grant.domain_namespace}/{grant.domain_name}",
        f"{ENV_DOMAIN_UID}={grant.domain_uid}",
        f"{ENV_CHANNEL}={grant.channel}",
    )
    seat = grant.seat
    if seat is None:
        return domain
    ranks = (
        (f"{ENV_SLICE_RANK}={seat.slice_rank}", f"{ENV_RANK}={seat.rank}")
        if seat.rank is not None and seat.slice_rank is not None
        else ()
    )
    return (
        *domain,
        f"{ENV_CLIQUE}={seat.clique}",
        f"{ENV_SLICE_INDEX}={seat.index}",
        f"{ENV_SLICE_SIZE}={seat.size}",
        *ranks,
        f"{NVIDIA_ENV_CLIQUE}={seat.clique}",
        f"{NVIDIA_ENV_DOMAIN_UID}={grant.domain_uid}",
        f"{NVIDIA_ENV_DOMAIN_NAME}={grant.domain_name}",
        f"{NVIDIA_ENV_DOMAIN_NAMESPACE}={grant.domain_namespace}",
    )


def device_name(claim_uid: str) -> str:
    if not _DEVICE_NAME.match(claim_uid):
        raise ValueError(f"claim uid {claim_uid!r} is not a valid CDI device name")
    return claim_uid


def device_id(claim_uid: str) -> str:
    """The fully qualified CDI device id the kubelet passes to the runtime."""
    return f"{CDI_KIND}={device_name(claim_uid)}"


def spec_file_name(claim_uid: str) -> str:
    return f"{CDI_FILE_PREFIX}{claim_uid}.json"


def render_spec(grant: ChannelGrant, *, major: int, host_dir: Path) -> CdiSpec:
    """The CDI spec that gives ``grant.channel`` and :func:`grant_env` to the claim's
    containers."""
    node = DeviceNode(
        path=f"{CHANNEL_CONTAINER_DIR}/channel{grant.channel}",
        host_path=str(host_dir / f"channel{grant.channel}"),
        type="c",
        major=major,
        minor=grant.channel,
        permissions="rw",
    )
    edits = ContainerEdits(
        env=grant_env(grant),
        device_nodes=(node,),
    )
    return CdiSpec(
        cdi_version=CDI_VERSION,
        kind=CDI_KIND,
        devices=(CdiDevice(name=device_name(grant.claim_uid), container_edits=edits),),
    )


def encode_spec(spec: CdiSpec) -> bytes:
    return msgspec.json.format(msgspec.json.encode(spec), indent=2) + b"\n"


class CdiStore:
    """The agent's spec files in the CDI directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, claim_uid: str) -> Path:
        return self.root / spec_file_name(claim_uid)

    def write(self, claim_uid: str, spec: CdiSpec) -> bool:
        """Write the claim's spec unless the file already holds it; True when written."""
        return write_bytes_if_changed(self.path(claim_uid), encode_spec(spec))

    def remove(self, claim_uid: str) -> bool:
        return remove(self.path(claim_uid))

    def claim_uids(self) -> set[str]:
        """Claims that have a spec file of ours now."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return set()
        return {
            name[len(CDI_FILE_PREFIX) : -len(".json")]
            for name in names
            if name.startswith(CDI_FILE_PREFIX) and name.endswith(".json")
        }
