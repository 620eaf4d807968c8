"""IMEX daemon counts of the hosted nodes, and the restarts between two of them.

The node host's control API (``GET /imex``) counts the daemon instances each node started and
the restarts its IMEX agent counted; the demo, the benchmarks and the tests read it twice and
compare, to show that churn does not restart the daemons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.control.http import request
from sim.control.state import require_nodehost


@dataclass(frozen=True)
class ImexCount:
    """One node's IMEX daemon counters, as the node host's control API reports them."""

    node: str
    daemons_started: int
    """Daemon instances the node started since the node host began, the first one included."""
    agent_restarts: int | None = None
    """Restarts counted by the node's current IMEX agent (None: no agent runs)."""


def imex_counts(state_dir: Path) -> dict[str, ImexCount]:
    """Every hosted node's IMEX counters now (``GET /imex`` of the node host), by node."""
    host = require_nodehost(state_dir)
    entries: list[dict[str, Any]] = request(host.control_url, "GET", "/imex")
    return {
        entry["name"]: ImexCount(
            node=entry["name"],
            daemons_started=int(entry["daemons_started"]),
            agent_restarts=entry.get("agent_restarts"),
        )
        for entry in entries
    }


def imex_restarts(
    before: Mapping[str, ImexCount], after: Mapping[str, ImexCount]
) -> dict[str, int]:
    """IMEX daemon restarts of each node of ``after`` between the two counts (pure).

    A restart is a daemon started when the node already had one: the new instances (less the
    node's first, if it had none at ``before``), or the rise of its agent's own counter (its
    whole count if the agent started afresh in between), whichever is larger.
    """
    restarts = {}
    for node, now in after.items():
        then = before.get(node)
        started = then.daemons_started if then is not None else 0
        instances = now.daemons_started - started - (1 if started == 0 else 0)
        counted = now.agent_restarts or 0
        earlier = then.agent_restarts if then is not None else None
        if earlier is not None and counted >= earlier:
            counted -= earlier
        restarts[node] = max(instances, counted, 0)
    return restarts
