"""``policy/v1`` PodDisruptionBudget: budget fields, selector, status counters.

The disruption controller that fills the status is not emulated; clients (or tests) write
``/status`` themselves. The eviction subresource (:mod:`sim.kubeapi.cluster.eviction`) reads
``status.disruptionsAllowed`` and lowers it by one for each eviction it lets through.
"""

from __future__ import annotations

import re
from typing import Any

from sim.kubeapi.kinds.common import get, non_negative
from sim.kubeapi.machinery import errors, selectors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
STATUS_COUNTERS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
_PERCENT = re.compile(r"^[0-9]+%$")
PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)


def validate_int_or_percent(value: Any, path: str) -> list[FieldError]:
    """A non-negative count or a percentage of at most 100%."""
    if value is None:
        return []
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [errors.invalid(path, value, PERCENT_MSG)]
        if int(value[:-1]) > 100:
            return [errors.invalid(path, value, "must not be greater than 100%")]
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        return non_negative(value, path)
    return [errors.invalid(path, value, "must be an integer or percentage (e.g '5%')")]


def _budget(key: str) -> Any:
    def cell(o: Obj) -> str:
        value = get(o, "spec", key)
        return "N/A" if value is None else str(value)

    return cell


def _allowed(o: Obj) -> int:
    value = get(o, "status", "disruptionsAllowed")
    return value if isinstance(value, int) else 0


class PodDisruptionBudgetStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def initial_status(self, obj: Obj) -> Any:
        return dict.fromkeys(STATUS_COUNTERS, 0)

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if spec is None:
            return []
        if not isinstance(spec, dict):
            return [errors.type_invalid("spec", spec, "must be an object")]
        out: list[FieldError] = []
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            out.append(
                errors.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
            )
        for key in ("minAvailable", "maxUnavailable"):
            out.extend(validate_int_or_percent(spec.get(key), f"spec.{key}"))
        out.extend(selectors.validate_label_selector_object(spec.get("selector"), "spec.selector"))
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in EVICTION_POLICIES:
            out.append(
                errors.not_supported("spec.unhealthyPodEvictionPolicy", policy, EVICTION_POLICIES)
            )
        return out

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        out: list[FieldError] = []
        for key in STATUS_COUNTERS:
            out.extend(non_negative(status.get(key), f"status.{key}"))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Min Available",
                "string",
                _budget("minAvailable"),
                "",
                "The minimum number of pods that must be available.",
            ),
            Column(
                "Max Unavailable",
                "string",
                _budget("maxUnavailable"),
                "",
                "The maximum number of pods that may be unavailable.",
            ),
            Column(
                "Allowed Disruptions",
                "integer",
                _allowed,
                "",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            columns.age_column(),
        ]
