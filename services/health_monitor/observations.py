"""What the monitor currently knows about its node: faults from readings and latched events.

State faults come whole with every reading and replace the previous reading's. Transient
faults (XIDs, ECC rises) are latched: each stays active for ``latch_s`` after it was last
reported. Faults seen since the last evaluation are kept until it takes them, so a fault that
appears and clears between two evaluations still counts once.

Everything here runs on the monitor's event loop; time is passed in (monotonic seconds).
"""

from __future__ import annotations

from collections.abc import Iterable

from services.health_monitor.faults import Fault
from shared.nvml import NodeClique


class Observations:
    """The node's active faults and clique, as the readings and events have shown them."""

    def __init__(self, *, latch_s: float) -> None:
        self._latch_s = latch_s
        self._state: dict[str, Fault] = {}
        self._latched: dict[str, tuple[Fault, float]] = {}  # key -> (fault, active until)
        self._seen: dict[str, Fault] = {}
        self.clique: NodeClique | None = None
        self.unavailable: str | None = None  # why NVML cannot be read, None while it can
        self.gpu_count = 0  # GPUs the last whole reading showed (0: none read yet)

    def update_reading(
        self,
        faults: Iterable[Fault],
        *,
        clique: NodeClique | None,
        unavailable: str | None = None,
        gpu_count: int | None = None,
    ) -> bool:
        """Replace the state faults with a new reading's; True if anything changed."""
        if gpu_count is not None:
            self.gpu_count = gpu_count
        state = {fault.key: fault for fault in faults}
        changed = state != self._state or clique != self.clique or unavailable != self.unavailable
        self._state = state
        self.clique = clique
        self.unavailable = unavailable
        self._seen.update(state)
        return changed

    def latch(self, fault: Fault, *, now: float) -> bool:
        """Keep a transient fault active for ``latch_s`` from ``now``; True if it is new."""
        new = fault.key not in self._latched
        self._latched[fault.key] = (fault, now + self._latch_s)
        self._seen[fault.key] = fault
        return new

    def _expire(self, now: float) -> None:
        for key in [key for key, (_, until) in self._latched.items() if until <= now]:
            # Active until now: the evaluation that sees it go still counts it, so the
            # hold-down starts when the latch ended, not when the XID came.
            self._seen[key] = self._latched.pop(key)[0]

    def active(self, now: float) -> tuple[Fault, ...]:
        """Every fault active at ``now``; a latched fault wins over a state fault of its key."""
        self._expire(now)
        merged = dict(self._state)
        merged.update((key, fault) for key, (fault, _) in self._latched.items())
        return tuple(merged.values())

    def take_seen(self, now: float) -> tuple[Fault, ...]:
        """The active faults plus those seen since the last call, which starts a new period."""
        active = self.active(now)
        merged = dict(self._seen)
        merged.update((fault.key, fault) for fault in active)
        self._seen = {}
        return tuple(merged.values())

    def next_expiry(self) -> float | None:
        """When the next latched fault expires, if any is latched."""
        return min((until for _, until in self._latched.values()), default=None)
