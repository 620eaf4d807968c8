"""How many GPUs of NVIDIA's GPU DRA driver a claim spec asks for (a pure function).

A claim spec's ``devices.requests`` ask for GPUs with ``exactly`` of deviceClassName
``gpu.nvidia.com``: ``count`` devices (1 by default) with allocationMode ``ExactCount``, every
GPU of the node with ``All``. The clique allocator counts a pod's GPUs with it, and the domain
controller tells with it whether a domain's pods use DRA GPUs at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.crds.names import GPU_DEVICE_CLASS


def claim_spec_gpus(spec: Mapping[str, Any]) -> tuple[int, bool]:
    """(GPUs, whole node) a claim spec (``spec.devices.requests``) asks for."""
    devices = spec.get("devices") or {}
    count, whole = 0, False
    for request in devices.get("requests") or ():
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if not isinstance(exactly, dict) or exactly.get("deviceClassName") != GPU_DEVICE_CLASS:
            continue
        if exactly.get("allocationMode") == "All":
            whole = True
        else:
            wanted = exactly.get("count", 1)
            count += wanted if isinstance(wanted, int) else 1
    return count, whole


def asks_for_gpus(spec: Mapping[str, Any]) -> bool:
    """Whether a claim spec asks for any GPU of the driver."""
    count, whole = claim_spec_gpus(spec)
    return count > 0 or whole
