"""Which XIDs make NVIDIA's device plugin mark a GPU Unhealthy: a pure decision.

NVIDIA's k8s-device-plugin listens for NVML XID critical error events on every GPU and marks
the GPU of an event ``Unhealthy`` unless the XID is one of the application errors it skips by
default (13, 31, 43, 45, 68, 109: the GPU itself is fine), plus any the operator disables
(``DP_DISABLE_HEALTHCHECKS``) and less any it enables again (``DP_ENABLE_HEALTHCHECKS``)
(``internal/rm/health.go`` of NVIDIA/k8s-device-plugin). A failed event wait marks every
GPU Unhealthy. Nothing marks a GPU healthy again: the plugin's own code says there is no way
to recover from the Unhealthy state (``internal/plugin/server.go``); only a restart of the
plugin, which lists every GPU afresh, does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from shared.kubeletapi.deviceplugin import HEALTHY, UNHEALTHY, Device

SKIPPED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""Application errors NVIDIA's plugin ignores by default: the GPU should still be healthy."""


def makes_unhealthy(xid: int, *, disabled: Iterable[int] = (), enabled: Iterable[int] = ()) -> bool:
    """Whether XID ``xid`` marks its GPU Unhealthy (``enabled`` wins over ``disabled``)."""
    if xid in set(enabled):
        return True
    return xid not in SKIPPED_XIDS and xid not in set(disabled)


def device_list(uuids: Sequence[str], health: Mapping[str, str]) -> list[Device]:
    """The ListAndWatch list: every GPU by UUID, in NVML index order, with its health."""
    return [Device(id=uuid, health=health.get(uuid, HEALTHY)) for uuid in uuids]


def all_unhealthy(uuids: Iterable[str]) -> dict[str, str]:
    return dict.fromkeys(uuids, UNHEALTHY)
