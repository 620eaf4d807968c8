"""Health signals: one Struct per kind of observation the monitor classifies.

A signal is an observation that may need a reaction: an XID event, a fabric fault read from
fabric info, links down, an ECC count that rose ... ``signal`` is the tag when encoded, so
signals can travel in events as a tagged union. ``gpu`` is the NVML index of the GPU the
signal is about, None for node-wide signals.
"""

from __future__ import annotations

import enum

import msgspec


class _Signal(msgspec.Struct, frozen=True, kw_only=True, tag_field="signal"):
    gpu: int | None = None


class XidError(_Signal, frozen=True, kw_only=True, tag="xid"):
    xid: int


class FabricNotReady(_Signal, frozen=True, kw_only=True, tag="fabric_not_ready"):
    """Fabric registration has not completed (a shared.nvml FabricState value)."""

    state: int


class FabricRegistrationFailed(_Signal, frozen=True, kw_only=True, tag="fabric_failed"):
    """Fabric registration completed with an error (an NVML return code)."""

    status: int


class FabricCondition(enum.StrEnum):
    """Fabric health mask sub-fields, named by the problem they report."""

    DEGRADED_BW = "degraded_bw"
    ROUTE_RECOVERY = "route_recovery"
    ROUTE_UNHEALTHY = "route_unhealthy"
    ACCESS_TIMEOUT_RECOVERY = "access_timeout_recovery"
    INCORRECT_CONFIGURATION = "incorrect_configuration"
    PARTITION_UNASSIGNED = "partition_unassigned"
    GFM_DISCONNECTED = "gfm_disconnected"


class FabricHealthFault(_Signal, frozen=True, kw_only=True, tag="fabric_health"):
    """One sub-field of the fabric health mask reports a problem; ``value`` is its raw value."""

    condition: FabricCondition
    value: int


class FabricHealthSummary(_Signal, frozen=True, kw_only=True, tag="fabric_summary"):
    """The v3 fabric health summary (a shared.nvml FabricHealthSummary value)."""

    summary: int


class NvLinkDown(_Signal, frozen=True, kw_only=True, tag="nvlink_down"):
    links: tuple[int, ...]  # indices of the links that are down
    total: int  # links the GPU has


class EccUncorrected(_Signal, frozen=True, kw_only=True, tag="ecc_uncorrected"):
    """The uncorrected ECC count rose by ``increase`` since the previous reading."""

    increase: int
    total: int


class RowRemapPending(_Signal, frozen=True, kw_only=True, tag="row_remap_pending"):
    pass


class RowRemapFailure(_Signal, frozen=True, kw_only=True, tag="row_remap_failure"):
    pass


class GpuLost(_Signal, frozen=True, kw_only=True, tag="gpu_lost"):
    pass


class RecoveryActionRequired(_Signal, frozen=True, kw_only=True, tag="recovery_action"):
    """The GPU recovery action field (a shared.nvml RecoveryAction value)."""

    action: int


class CliqueDisagreement(_Signal, frozen=True, kw_only=True, tag="clique_disagreement"):
    """The node's GPUs report different NVLink cliques."""

    cliques: tuple[str, ...]


class NvmlUnavailable(_Signal, frozen=True, kw_only=True, tag="nvml_unavailable"):
    """NVML cannot be read on the node at all."""

    reason: str


Signal = (
    XidError
    | FabricNotReady
    | FabricRegistrationFailed
    | FabricHealthFault
    | FabricHealthSummary
    | NvLinkDown
    | EccUncorrected
    | RowRemapPending
    | RowRemapFailure
    | GpuLost
    | RecoveryActionRequired
    | CliqueDisagreement
    | NvmlUnavailable
)
