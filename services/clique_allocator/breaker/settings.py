"""Settings of the circuit breaker's arbiter (CDO_CLIQUE_ALLOCATOR_BREAKER_*)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from shared.breaker import BreakerCaps


class BreakerSettings(BreakerCaps, frozen=True, kw_only=True):
    """The caps on NoExecute taints and the Nodes they count."""

    node_selector: Annotated[
        str,
        Meta(
            description="Label selector of the Nodes the breaker counts (empty: every Node); "
            "it must match every node a health monitor runs on, e.g. "
            "nvidia.com/gpu.present=true."
        ),
    ] = ""
