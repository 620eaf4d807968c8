"""``cdo sim nats|restart|freeze|thaw`` say clearly what they cannot do."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from shared.command_errors import CommandError, UsageError
from sim.control.freeze import freeze, thaw
from sim.control.restart import nats_start, nats_stop, restart


@pytest.mark.parametrize(
    "act",
    [
        partial(restart, component="control-plane"),
        partial(restart, component="node-host"),
        nats_stop,
        nats_start,
    ],
)
def test_nothing_runs_here(tmp_path: Path, act: Callable[..., None]) -> None:
    with pytest.raises(CommandError, match="nothing started by cdo sim up"):
        act(tmp_path, say=print)


def test_no_cluster_and_no_control_plane(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no simulated cluster runs"):
        restart(tmp_path, "api", say=print)
    with pytest.raises(CommandError, match="no control plane runs clique-allocator"):
        freeze(tmp_path, "clique-allocator", say=print)


def test_only_what_can_be_restarted_or_frozen_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="control-plane, node-host, api"):
        restart(tmp_path, "nats", say=print)
    with pytest.raises(UsageError, match="domain-controller, clique-allocator"):
        thaw(tmp_path, "node-host", say=print)
