"""A node's place in its rack from its GPUs' platform info: a pure decision.

The IMEX roster orders a clique's nodes by tray index; every GPU of a tray reports the same
tray, slot and chassis, so a node has a placement only when all of them agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from shared.nvml.model import PlatformInfo


class NodePlacement(msgspec.Struct, frozen=True, kw_only=True):
    tray_index: int
    slot_number: int
    chassis_serial: str


def node_placement(platforms: Sequence[PlatformInfo | None]) -> NodePlacement | None:
    """The node's tray, slot and chassis; None if any GPU lacks platform info or they differ."""
    if not platforms or any(info is None for info in platforms):
        return None
    placements = {
        NodePlacement(
            tray_index=info.tray_index,
            slot_number=info.slot_number,
            chassis_serial=info.chassis_serial,
        )
        for info in platforms
        if info is not None
    }
    return placements.pop() if len(placements) == 1 else None
