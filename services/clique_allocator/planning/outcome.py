"""What one reconcile of a domain does: the :class:`Plan` ``plan.py`` decides, and its pins."""

from __future__ import annotations

from typing import Literal

import msgspec

from services.clique_allocator.placement import Reservation
from services.clique_allocator.planning.hold import Hold
from services.clique_allocator.planning.notices import Notice
from shared.crds.placement import PlacementSpec

Action = Literal["keep", "write", "delete"]


class Pin(msgspec.Struct, frozen=True, kw_only=True):
    """Pin ``pod`` to ``node`` and remove its gate; ``waited``: it carries a False condition.
    ``node`` "": only remove the gate, the scheduler chooses (a domain without IMEX)."""

    pod: str
    node: str
    waited: bool = False


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one reconcile of a domain does."""

    action: Action = "keep"
    record: PlacementSpec | None = None
    """The record to write when ``action`` is ``write``."""
    reservations: tuple[Reservation, ...] = ()
    """The engine's reservations matching ``record`` (one per slice), to advance the view."""
    pins: tuple[Pin, ...] = ()
    holds: tuple[Hold, ...] = ()
    notices: tuple[Notice, ...] = ()
    waiting: bool = False
    """Some of the domain's pods wait for capacity: try again when capacity changes."""
    released: bool = False
    """The domain gives GPUs back: gangs that wait may fit now."""
    unknown_size: bool = False
    """The gang's size cannot be told yet: look again soon."""
    evictions: tuple[str, ...] = ()
    """Pods of slices that failed over, to evict once the record is written."""
    retry_after_s: float | None = None
    """Look again after this long (a stuck slice's failover grace ends)."""
