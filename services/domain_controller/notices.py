"""Which status changes deserve a Kubernetes Event (``kubectl describe`` shows them).

Only transitions, never steady state: becoming placed, ready, not ready, degraded, recovered,
a template name conflict, and each step of a deletion. Pure: old and new status in, notices out.
"""

from __future__ import annotations

import msgspec

from services.domain_controller.status import DEGRADED, DELETING, PLACED, READY
from shared.crds.computedomain import ComputeDomainStatus, DomainCondition
from shared.kube.recorder import EventType


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    type: EventType
    reason: str
    message: str


def _became(
    old: DomainCondition | None, new: DomainCondition | None, status: str
) -> DomainCondition | None:
    """``new`` if it has ``status`` now and did not before."""
    if new is None or new.status != status:
        return None
    if old is not None and old.status == status:
        return None
    return new


def notices(old: ComputeDomainStatus, new: ComputeDomainStatus) -> list[Notice]:
    out: list[Notice] = []
    placed = _became(old.condition(PLACED), new.condition(PLACED), "True")
    if placed is not None:
        out.append(Notice(type="Normal", reason="Placed", message=placed.message))
    old_ready, new_ready = old.condition(READY), new.condition(READY)
    ready = _became(old_ready, new_ready, "True")
    if ready is not None:
        out.append(Notice(type="Normal", reason="Ready", message=ready.message))
    lost = _became(old_ready, new_ready, "False")
    if lost is not None and old_ready is not None:
        out.append(
            Notice(type="Warning", reason="NotReady", message=f"{lost.reason}: {lost.message}")
        )
    if (
        new_ready is not None
        and new_ready.reason == "TemplateNameConflict"
        and (old_ready is None or old_ready.reason != "TemplateNameConflict")
    ):
        out.append(Notice(type="Warning", reason="TemplateNameConflict", message=new_ready.message))
    old_degraded, new_degraded = old.condition(DEGRADED), new.condition(DEGRADED)
    degraded = _became(old_degraded, new_degraded, "True")
    if degraded is not None:
        out.append(
            Notice(
                type="Warning",
                reason="Degraded",
                message=f"{degraded.reason}: {degraded.message}",
            )
        )
    recovered = _became(old_degraded, new_degraded, "False")
    if recovered is not None and old_degraded is not None:
        out.append(Notice(type="Normal", reason="Recovered", message=recovered.message))
    old_deleting, new_deleting = old.condition(DELETING), new.condition(DELETING)
    if new_deleting is not None and (
        old_deleting is None or old_deleting.reason != new_deleting.reason
    ):
        out.append(Notice(type="Normal", reason=new_deleting.reason, message=new_deleting.message))
    return out
