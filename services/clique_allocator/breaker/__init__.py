"""The circuit breaker's arbiter: the clique allocator's leader answers the health monitors'
claims for NoExecute (``rulings``: pure; ``arbiter``: the shell)."""

from services.clique_allocator.breaker.arbiter import BreakerArbiter
from services.clique_allocator.breaker.rulings import Ruling, arbitrate
from services.clique_allocator.breaker.settings import BreakerSettings

__all__ = ["BreakerArbiter", "BreakerSettings", "Ruling", "arbitrate"]
