"""``cdo sim nats|restart|freeze|thaw`` say clearly what they cannot do."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.command_errors import CommandError, UsageError
from sim.control.freeze import freeze, thaw
from sim.control.restart import nats_start, nats_stop, restart


def test_nothing_runs_here(tmp_path: Path) -> None:
    for act in (
        lambda: restart(tmp_path, "control-plane", say=print),
        lambda: restart(tmp_path, "node-host", say=print),
        lambda: nats_stop(tmp_path, say=print),
        lambda: nats_start(tmp_path, say=print),
    ):
        with pytest.raises(CommandError, match="nothing started by cdo sim up"):
            act()
    with pytest.raises(CommandError, match="no simulated cluster runs"):
        restart(tmp_path, "api", say=print)
    with pytest.raises(CommandError, match="no control plane runs clique-allocator"):
        freeze(tmp_path, "clique-allocator", say=print)


def test_only_what_can_be_restarted_or_frozen_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="control-plane, node-host, api"):
        restart(tmp_path, "nats", say=print)
    with pytest.raises(UsageError, match="domain-controller, clique-allocator"):
        thaw(tmp_path, "node-host", say=print)
