"""JSON merge patch (RFC 7386) on JSON trees."""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import codec


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch, returning the new value (inputs are not modified)."""
    if not isinstance(patch, dict):
        return codec.copy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
