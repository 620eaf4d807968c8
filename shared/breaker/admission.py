"""One decision of the circuit breaker, and the cap behind it."""

from __future__ import annotations

from datetime import datetime

import msgspec

CLIQUE = "clique"
CLUSTER = "cluster"


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """One decision of the breaker, and the scope that decided it."""

    granted: bool
    decided_at: datetime
    scope: str = ""  # CLIQUE or CLUSTER: the scope whose cap holds the node back
    clique: str = ""
    counted: int = 0  # nodes of the scope, this one aside, that hold NoExecute
    size: int = 0  # nodes in the scope, this one included
    limit: int = 0
    share: float = 0.0
    window_s: float = 0.0  # how long a grant counts after it
    claim: datetime | None = None  # the record this decides (its ``at``)

    def describe(self) -> str:
        """The cap in words, for the condition and the Event."""
        where = f"clique {self.clique}" if self.scope == CLIQUE else "the cluster"
        return (
            f"{self.counted} of {self.size} nodes of {where} hold NoExecute or had it within "
            f"{self.window_s:g}s (cap {self.share:.0%}: {self.limit})"
        )
