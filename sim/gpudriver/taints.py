"""Device taints NVIDIA's GPU driver puts on a GPU after an XID (pure, plus a small ledger).

An XID event on a GPU taints that GPU's device with ``gpu.nvidia.com/xid``, value the XID:
effect ``NoSchedule`` (the scheduler allocates the device to no new claim), or ``None`` (only
informational) for the XIDs NVIDIA's driver treats as application errors: 13, 31, 43, 45, 68
and 109 (its built-in list up to v0.5.0). One taint per distinct XID; ``timeAdded`` is when it
was first seen. Taints live as long as the driver: a restarted driver (as after a node's power
cycle, which resets the GPUs) starts without them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

XID_TAINT = "gpu.nvidia.com/xid"
NON_FATAL_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def xid_effect(xid: int) -> str:
    return "None" if xid in NON_FATAL_XIDS else "NoSchedule"


def _timestamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TaintLedger:
    """The XIDs seen per GPU index, and the taints they make."""

    def __init__(self) -> None:
        self._seen: dict[int, dict[int, datetime]] = {}

    def record(self, gpu: int, xid: int, *, now: datetime | None = None) -> bool:
        """Note ``xid`` on ``gpu``; True when it is new for that GPU (the slice changes)."""
        seen = self._seen.setdefault(gpu, {})
        if xid in seen:
            return False
        seen[xid] = now or datetime.now(UTC)
        return True

    def taints(self, gpu: int) -> list[dict[str, Any]]:
        """The device taints of ``gpu``, by XID."""
        return [
            {
                "key": XID_TAINT,
                "value": str(xid),
                "effect": xid_effect(xid),
                "timeAdded": _timestamp(when),
            }
            for xid, when in sorted(self._seen.get(gpu, {}).items())
        ]
