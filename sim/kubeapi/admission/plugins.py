"""Built-in mutating admission plugins of the real API server that clients rely on.

They run on creates and updates of the object itself (not its subresources), before the
mutating webhooks, as the real server orders its plugins. Implemented: DefaultTolerationSeconds
(a pod without a toleration for the ``not-ready`` / ``unreachable`` NoExecute taints gets one,
so a node that goes away evicts its pods only after that grace).
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.storage.resources import Obj

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NO_EXECUTE = "NoExecute"


def _covers(toleration: Any, key: str) -> bool:
    """Whether a toleration already answers the taint ``key:NoExecute``. Like the real plugin
    only key and effect count (empty matches all), not operator or value."""
    if not isinstance(toleration, dict):
        return False
    return toleration.get("key") in (key, "", None) and toleration.get("effect") in (
        NO_EXECUTE,
        "",
        None,
    )


def default_toleration_seconds(pod: Obj, seconds: int) -> None:
    """Append the not-ready and unreachable tolerations ``pod`` lacks (in place)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    current = spec.get("tolerations")
    if current is None:
        current = []
    if not isinstance(current, list):
        return  # left for validation to refuse
    added = [
        {"key": key, "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": seconds}
        for key in (NOT_READY, UNREACHABLE)
        if not any(_covers(t, key) for t in current)
    ]
    if added:
        spec["tolerations"] = [*current, *added]
