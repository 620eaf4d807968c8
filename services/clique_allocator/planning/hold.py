"""Step 4 of a plan: hold gated pods that got no slot, with the reason (pure).

The reason is the engine's (``InsufficientCapacity``, ``CliqueFull`` ...) when the gang could not
grow, else ``GangComplete``: every slot the gang wants is taken. A hold is left out when the
pod's ``cdo.dev/Placed`` condition already says exactly that, so a waiting gang's retries write
nothing; a Warning Event is recorded only when some pod learns the reason now.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from services.clique_allocator.placement import NotPlaced
from services.clique_allocator.planning.notices import Notice
from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod

GANG_COMPLETE = "GangComplete"


class Hold(msgspec.Struct, frozen=True, kw_only=True):
    """Keep ``pod`` gated; set its ``cdo.dev/Placed`` condition to False with this reason."""

    pod: str
    reason: str
    message: str


def waited(pod: Pod) -> bool:
    """The pod carries a False ``cdo.dev/Placed`` condition (it was held before)."""
    condition = pod.condition(PLACED_CONDITION)
    return condition is not None and condition.status == "False"


def hold(pod: Pod, reason: str, message: str) -> Hold | None:
    """A hold for ``pod``, unless its condition already says exactly that."""
    condition = pod.condition(PLACED_CONDITION)
    if condition is not None and (condition.status, condition.reason, condition.message) == (
        "False",
        reason,
        message,
    ):
        return None
    return Hold(pod=pod.metadata.name, reason=reason, message=message)


def holds(pods: Sequence[Pod], reason: str, message: str) -> tuple[Hold, ...]:
    return tuple(found for pod in pods if (found := hold(pod, reason, message)) is not None)


def hold_left(
    left: Sequence[Pod], not_placed: NotPlaced | None, *, gang_pods: int, source: str
) -> tuple[Hold, ...]:
    """Holds for the pods no slot took."""
    if not_placed is not None:
        return holds(left, not_placed.reason, not_placed.message)
    message = (
        f"the gang's {gang_pods} pod slots ({source}) are all taken; "
        "this pod waits for one of them to end"
    )
    return holds(left, GANG_COMPLETE, message)


def not_placed_notice(decision: NotPlaced | None, held: Sequence[Hold]) -> tuple[Notice, ...]:
    """A Warning when pods learn the engine's reason now (not again on every retry)."""
    if decision is None or not any(found.reason == decision.reason for found in held):
        return ()
    return (Notice(type="Warning", reason=decision.reason, message=decision.message),)
