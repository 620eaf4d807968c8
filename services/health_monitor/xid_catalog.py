"""XIDs by NVIDIA's resolution bucket, and what each bucket means for a node here.

NVIDIA's XID catalog for Ampere and newer GPUs gives every XID an immediate-action
"resolution bucket" (see docs/health-classification.md for sources). The table below records
the bucket of every XID the catalog marks as in use; :data:`BUCKET_RULES` turns a bucket into
a severity and an action. XIDs the catalog lists as unused, or without a bucket, fall to the
``xid.default`` rule.
"""

from __future__ import annotations

import enum

from services.health_monitor.rules import Action, Rule, Severity


class Bucket(enum.StrEnum):
    """NVIDIA's immediate-action resolution buckets, by their catalog names."""

    IGNORE = "IGNORE"
    RESTART_APP = "RESTART_APP"
    RESET_GPU = "RESET_GPU"
    RESTART_BM = "RESTART_BM"  # restart the bare-metal node
    RESTART_VM = "RESTART_VM"
    CONTACT_SUPPORT = "CONTACT_SUPPORT"
    CHECK_MECHANICALS = "CHECK_MECHANICALS"
    UPDATE_SWFW = "UPDATE_SWFW"
    CHECK_UVM = "CHECK_UVM"
    WORKFLOW_XID_45 = "WORKFLOW_XID_45"
    WORKFLOW_XID_48 = "WORKFLOW_XID_48"
    WORKFLOW_NVLINK_ERR = "WORKFLOW_NVLINK_ERR"
    WORKFLOW_NVLINK5_ERR = "WORKFLOW_NVLINK5_ERR"
    XID_154 = "XID_154"


# (severity, action) per bucket. Workflow buckets are NVIDIA's multi-step procedures; each is
# resolved to the step that decides what happens to the node.
BUCKET_RULES: dict[Bucket, tuple[Severity, Action]] = {
    Bucket.IGNORE: (Severity.OK, Action.NONE),
    Bucket.RESTART_APP: (Severity.OK, Action.RESTART_APP),
    Bucket.RESET_GPU: (Severity.FATAL, Action.RESET_GPU),
    # A GPU off the bus cannot be reset from the host: the node has to restart.
    Bucket.RESTART_BM: (Severity.FATAL, Action.DRAIN_NODE),
    Bucket.RESTART_VM: (Severity.FATAL, Action.DRAIN_NODE),
    Bucket.CONTACT_SUPPORT: (Severity.WARNING, Action.NONE),
    Bucket.CHECK_MECHANICALS: (Severity.WARNING, Action.DRAIN_NODE),
    Bucket.UPDATE_SWFW: (Severity.WARNING, Action.NONE),
    Bucket.CHECK_UVM: (Severity.WARNING, Action.NONE),
    # Preemptive cleanup: on its own an application teardown; with other XIDs those decide.
    Bucket.WORKFLOW_XID_45: (Severity.OK, Action.RESTART_APP),
    # A double-bit error leaves a row to remap, which takes a GPU reset.
    Bucket.WORKFLOW_XID_48: (Severity.FATAL, Action.RESET_GPU),
    # NVLink errors: NVML's event carries no sub-code to tell benign units from fatal ones,
    # so the whole family is treated as fatal; operators may relax it by override.
    Bucket.WORKFLOW_NVLINK_ERR: (Severity.FATAL, Action.RESET_GPU),
    Bucket.WORKFLOW_NVLINK5_ERR: (Severity.FATAL, Action.RESET_GPU),
    # The recovery action field it announces is read and classified on its own.
    Bucket.XID_154: (Severity.WARNING, Action.NONE),
}


def _same(bucket: Bucket, summary: str, *xids: int) -> dict[int, tuple[Bucket, str]]:
    return dict.fromkeys(xids, (bucket, summary))


# XID -> (bucket, short description).
XID_CATALOG: dict[int, tuple[Bucket, str]] = {
    8: (Bucket.RESTART_APP, "GPU stopped processing (channel idle timeout)"),
    11: (Bucket.RESTART_APP, "invalid or corrupted push buffer stream"),
    13: (Bucket.RESTART_APP, "graphics engine exception, usually the application's fault"),
    14: (Bucket.IGNORE, "deliberately injected test error"),
    25: (Bucket.RESTART_APP, "invalid or illegal push buffer stream"),
    31: (Bucket.RESTART_APP, "GPU memory page fault, usually the application's fault"),
    32: (Bucket.RESTART_APP, "invalid or corrupted push buffer stream (PBDMA)"),
    37: (Bucket.IGNORE, "driver firmware error"),
    38: (Bucket.IGNORE, "driver firmware watchdog timeout"),
    **_same(Bucket.RESTART_APP, "copy engine exception", 39, 40, 41),
    43: (Bucket.IGNORE, "GPU stopped processing on a channel being reset"),
    44: (Bucket.IGNORE, "graphics engine fault during a context switch"),
    45: (Bucket.WORKFLOW_XID_45, "preemptive cleanup after an earlier error"),
    46: (Bucket.RESET_GPU, "GPU stopped processing (GPU timeout)"),
    48: (Bucket.WORKFLOW_XID_48, "double-bit (uncorrectable) ECC error"),
    54: (Bucket.CHECK_MECHANICALS, "auxiliary power not connected to the board"),
    60: (Bucket.RESTART_APP, "video processor (SEC2) exception"),
    62: (Bucket.RESET_GPU, "internal micro-controller halted"),
    63: (Bucket.IGNORE, "memory row remapping event"),
    64: (Bucket.RESET_GPU, "memory row remapping failure"),
    **_same(Bucket.IGNORE, "illegal register access by the driver", 66, 67),
    68: (Bucket.RESTART_APP, "video decoder (NVDEC0) exception"),
    69: (Bucket.RESTART_APP, "graphics engine class error"),
    **_same(
        Bucket.RESTART_APP,
        "copy engine error",
        70,
        71,
        72,
        75,
        76,
        77,
        85,
        *range(126, 136),
    ),
    74: (Bucket.WORKFLOW_NVLINK_ERR, "NVLink error"),
    78: (Bucket.UPDATE_SWFW, "vGPU start error"),
    79: (Bucket.RESTART_BM, "GPU has fallen off the bus"),
    80: (Bucket.RESTART_APP, "corrupted data sent to the GPU"),
    **_same(Bucket.RESTART_APP, "JPEG decoder exception", 82, *range(99, 106)),
    **_same(Bucket.RESTART_APP, "video decoder exception", 83, 84, 88, 89, 96, 97, 98),
    **_same(Bucket.RESTART_APP, "optical flow accelerator exception", 86, 139),
    92: (Bucket.IGNORE, "high single-bit ECC error rate"),
    93: (Bucket.IGNORE, "InfoROM wear limit exceeded (non-fatal)"),
    94: (Bucket.RESTART_APP, "contained uncorrectable memory error"),
    95: (Bucket.RESET_GPU, "uncontained uncorrectable memory error"),
    **_same(Bucket.IGNORE, "SMBPBI test message", 106, 107),
    108: (Bucket.IGNORE, "NVLink remote translation error"),
    109: (Bucket.RESET_GPU, "context switch timeout"),
    110: (Bucket.RESET_GPU, "security fault"),
    119: (Bucket.RESET_GPU, "GSP RPC timeout"),
    120: (Bucket.RESET_GPU, "GSP error"),
    121: (Bucket.IGNORE, "C2C link error"),
    136: (Bucket.RESET_GPU, "NVLink link training failed"),
    137: (Bucket.IGNORE, "NVLink privilege error"),
    140: (Bucket.RESET_GPU, "unrecovered ECC error"),
    141: (Bucket.IGNORE, "CUDA fast path error"),
    143: (Bucket.RESET_GPU, "GPU initialization error"),
    144: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink SAW unit error"),
    145: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink RLW unit error"),
    146: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink TLW unit error"),
    147: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink TREX unit error"),
    148: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink NVLPW control error"),
    149: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink NETIR unit error"),
    150: (Bucket.WORKFLOW_NVLINK5_ERR, "NVLink MSE unit error"),
    151: (Bucket.RESTART_VM, "key rotation error (confidential computing)"),
    **_same(Bucket.IGNORE, "DLA error", 152, 153),
    154: (Bucket.XID_154, "GPU recovery action changed"),
    155: (Bucket.RESET_GPU, "NVLink software-defined error"),
    156: (Bucket.RESET_GPU, "resource retirement event"),
    157: (Bucket.IGNORE, "resource retirement failure"),
    158: (Bucket.RESET_GPU, "GPU fatal timeout"),
    159: (Bucket.CHECK_UVM, "CHI non-data error"),
    **_same(Bucket.IGNORE, "channel retirement event", 160, 161),
}

XID_DEFAULT_RULE = Rule(
    severity=Severity.WARNING,
    action=Action.NONE,
    summary="XID without a resolution in NVIDIA's catalog: reported, no action",
)


def xid_rules() -> dict[str, Rule]:
    """One rule per catalogued XID, keyed ``xid.<n>``, plus ``xid.default``."""
    rules = {
        f"xid.{xid}": Rule(
            severity=BUCKET_RULES[bucket][0],
            action=BUCKET_RULES[bucket][1],
            summary=f"XID {xid}: {summary} (NVIDIA: {bucket})",
        )
        for xid, (bucket, summary) in sorted(XID_CATALOG.items())
    }
    rules["xid.default"] = XID_DEFAULT_RULE
    return rules
