"""DRA device taints (KEP-5055, GA in Kubernetes 1.37), as the scheduler and the eviction
controller read them: pure functions.

A device's taints are those its ResourceSlice lists (``devices[].taints``) plus the taint of
every DeviceTaintRule whose ``deviceSelector`` matches it (``driver``, ``pool``, ``device``:
each one set must match; a rule without a selector matches nothing). A claim's request
tolerates a taint with its ``tolerations``, matched as node taints are
(:func:`sim.scheduler.filters.toleration_matches`). Effect ``None`` is informational: neither
the scheduler nor the eviction controller acts on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shared.kube.models import DeviceTaint, DeviceTaintRule, Taint, Toleration
from shared.scheduling.taints import toleration_matches

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def rule_selects(rule: DeviceTaintRule, *, driver: str, pool: str, device: str) -> bool:
    selector = rule.spec.device_selector
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == driver)
        and (selector.pool is None or selector.pool == pool)
        and (selector.device is None or selector.device == device)
    )


def device_taints(
    own: Sequence[DeviceTaint],
    rules: Iterable[DeviceTaintRule],
    *,
    driver: str,
    pool: str,
    device: str,
) -> tuple[DeviceTaint, ...]:
    """The slice's taints of the device and those of the rules that select it."""
    ruled = tuple(
        rule.spec.taint
        for rule in rules
        if rule_selects(rule, driver=driver, pool=pool, device=device)
    )
    return (*own, *ruled)


def as_node_taint(taint: DeviceTaint) -> Taint:
    return Taint(key=taint.key, value=taint.value, effect=taint.effect)


def tolerates(tolerations: Iterable[Toleration], taint: DeviceTaint) -> bool:
    node_taint = as_node_taint(taint)
    return any(toleration_matches(toleration, node_taint) for toleration in tolerations)


def blocks_allocation(
    taints: Iterable[DeviceTaint], tolerations: Sequence[Toleration]
) -> DeviceTaint | None:
    """The first NoSchedule or NoExecute taint the tolerations do not tolerate, if any."""
    return next(
        (
            taint
            for taint in taints
            if taint.effect in BLOCKING_EFFECTS and not tolerates(tolerations, taint)
        ),
        None,
    )
