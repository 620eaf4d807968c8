"""The IMEX daemon restarts of the story, as the node host counts them (not read from logs).

The node host's control API (``GET /imex``) reports, per hosted node, the daemon instances it
started and the restarts its IMEX agent counted; :func:`read_counts` takes such a reading,
:func:`sim.control.imex_restarts` turns two readings into restarts per node, and
:func:`restarts_phrase` (pure) says them for a note or the summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from shared.command_errors import CommandError
from sim import control as simctl
from sim.demo.bringup import Running
from sim.demo.monitor import StoryError


async def read_counts(running: Running) -> dict[str, simctl.ImexCount]:
    """Every node's IMEX counters now, from the node host."""
    try:
        return await asyncio.to_thread(simctl.imex_counts, running.state_dir)
    except CommandError as exc:
        raise StoryError(
            f"the node host did not report its IMEX daemons: {exc}",
            logs=[running.log("nodehost")],
        ) from exc


def restarts_phrase(restarts: Mapping[str, int]) -> str:
    """``0 on 36 nodes``, or ``3 (rack-1-tray02 2, rack-1-tray05 1) on 36 nodes``."""
    total = sum(restarts.values())
    nodes = len(restarts)
    where = ", ".join(f"{node} {count}" for node, count in sorted(restarts.items()) if count > 0)
    return f"{total}{f' ({where})' if where else ''} on {nodes} node{'' if nodes == 1 else 's'}"
