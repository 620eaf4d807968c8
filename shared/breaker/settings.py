"""The circuit breaker's caps, as the arbiter that applies them is configured."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from shared.settings import Settings


class BreakerCaps(Settings, frozen=True, kw_only=True):
    """The caps on NoExecute taints (docs/health-monitor.md, "Circuit breaker")."""

    clique_share: Annotated[
        float,
        Meta(
            description="Most of a clique's nodes that may hold NoExecute at once, as a share "
            "(rounded down, at least min_nodes).",
            ge=0,
            le=1,
        ),
    ] = 0.25
    cluster_share: Annotated[
        float,
        Meta(
            description="Most of the cluster's monitored nodes that may hold NoExecute at once, "
            "as a share (rounded down, at least min_nodes).",
            ge=0,
            le=1,
        ),
    ] = 0.1
    min_nodes: Annotated[
        int,
        Meta(
            description="Nodes of each clique and of the cluster that may always hold "
            "NoExecute, whatever the shares (0: only the shares count).",
            ge=0,
        ),
    ] = 1
    window_s: Annotated[
        float,
        Meta(
            description="A node granted NoExecute keeps counting against the caps for this "
            "long after the grant, even once its taint is gone (damps flapping).",
            ge=0,
        ),
    ] = 600.0
    claim_timeout_s: Annotated[
        float,
        Meta(
            description="A grant or an offer of room the node has not acted on counts for at "
            "least this long (and a grant for at least twice the time the claim says it "
            "acts within).",
            gt=0,
        ),
    ] = 30.0
