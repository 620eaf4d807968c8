"""A node's NVLink clique from its GPUs' fabric info: a pure decision.

The clique string is ``"<uuid.UUID(bytes=clusterUuid)>.<cliqueId>"``, the value GPU Feature
Discovery writes to ``nvidia.com/gpu.clique``. The cluster UUID names the NVLink domain (about
a rack) and the clique id the partition inside it; every unpartitioned rack uses the same
clique ids, so nodes are grouped by the whole string, never by the clique id alone.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence

import msgspec

from shared.nvml.model import NVML_SUCCESS, FabricInfo, FabricState

_ZERO_UUID = uuid.UUID(int=0)


class CliqueStatus(enum.StrEnum):
    READY = "ready"  # every GPU registered, all in one clique
    NO_GPUS = "no_gpus"
    NOT_SUPPORTED = "not_supported"  # no GPU takes part in an NVLink fabric
    PENDING = "pending"  # some GPU has not finished registering with the fabric
    FAILED = "failed"  # some GPU finished registering with an error status
    UNASSIGNED = "unassigned"  # registered, but without a cluster UUID
    DISAGREE = "disagree"  # the GPUs report different cliques


class CliqueGroup(msgspec.Struct, frozen=True, kw_only=True):
    clique: str
    gpus: tuple[int, ...]


class NodeClique(msgspec.Struct, frozen=True, kw_only=True):
    """The node's clique, or why it has none.

    ``gpus`` lists the GPUs the status is about (those pending, failed or unassigned);
    ``groups`` lists every clique seen with its GPUs when they disagree.
    """

    status: CliqueStatus
    reason: str
    clique: str | None = None
    cluster_uuid: uuid.UUID | None = None
    clique_id: int | None = None
    gpus: tuple[int, ...] = ()
    groups: tuple[CliqueGroup, ...] = ()


def clique_string(*, cluster_uuid: uuid.UUID, clique_id: int) -> str:
    return f"{cluster_uuid}.{clique_id}"


def clique_of(info: FabricInfo) -> str:
    """The clique string one GPU's fabric info names (valid once it has registered)."""
    return clique_string(cluster_uuid=info.cluster_uuid, clique_id=info.clique_id)


def _indices(infos: Sequence[FabricInfo]) -> tuple[int, ...]:
    return tuple(sorted(info.gpu_index for info in infos))


def node_clique(fabric: Sequence[FabricInfo]) -> NodeClique:
    """The clique of a node whose GPUs report ``fabric`` (one entry per readable GPU)."""
    if not fabric:
        return NodeClique(status=CliqueStatus.NO_GPUS, reason="no GPU fabric info to read")
    if all(info.state == FabricState.NOT_SUPPORTED for info in fabric):
        return NodeClique(
            status=CliqueStatus.NOT_SUPPORTED,
            reason="no GPU of the node takes part in an NVLink fabric",
        )
    pending = [info for info in fabric if info.state != FabricState.COMPLETED]
    if pending:
        states = sorted({_state_name(info.state) for info in pending})
        return NodeClique(
            status=CliqueStatus.PENDING,
            reason=f"fabric registration not completed ({', '.join(states)})",
            gpus=_indices(pending),
        )
    failed = [info for info in fabric if info.status != NVML_SUCCESS]
    if failed:
        codes = sorted({info.status for info in failed})
        return NodeClique(
            status=CliqueStatus.FAILED,
            reason=f"fabric registration failed with NVML status {codes}",
            gpus=_indices(failed),
        )
    unassigned = [info for info in fabric if info.cluster_uuid == _ZERO_UUID]
    if unassigned:
        return NodeClique(
            status=CliqueStatus.UNASSIGNED,
            reason="fabric registration completed without a cluster UUID",
            gpus=_indices(unassigned),
        )
    by_clique: dict[str, list[int]] = {}
    for info in fabric:
        by_clique.setdefault(clique_of(info), []).append(info.gpu_index)
    if len(by_clique) > 1:
        groups = tuple(
            CliqueGroup(clique=clique, gpus=tuple(sorted(gpus)))
            for clique, gpus in sorted(by_clique.items())
        )
        return NodeClique(
            status=CliqueStatus.DISAGREE,
            reason="GPUs report different cliques: "
            + "; ".join(f"{group.clique} on GPUs {list(group.gpus)}" for group in groups),
            groups=groups,
        )
    first = fabric[0]
    return NodeClique(
        status=CliqueStatus.READY,
        reason="every GPU registered in one clique",
        clique=clique_of(first),
        cluster_uuid=first.cluster_uuid,
        clique_id=first.clique_id,
    )


def _state_name(state: int) -> str:
    try:
        return FabricState(state).name
    except ValueError:
        return f"state {state}"
