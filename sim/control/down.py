"""``cdo sim down``: stop exactly what ``cdo sim up`` recorded, newest first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shared.command_errors import CommandError, UnreachableError
from sim.control.processes import stop
from sim.control.state import (
    CLUSTER_FILE,
    CONTROLPLANE_FILE,
    NODEHOST_FILE,
    RECORD_FILE,
    read_cluster,
    read_record,
)


def down(state_dir: Path, *, say: Callable[[str], None]) -> None:
    record = read_record(state_dir)
    if record is None:
        cluster = read_cluster(state_dir)
        if cluster is not None:
            raise CommandError(
                f"the cluster in {state_dir} was not started by cdo sim up; stop it where it "
                f"runs (pid {cluster.pid})"
            )
        raise UnreachableError(f"nothing started by cdo sim up runs in {state_dir}")
    for process in reversed(record.processes):
        say(stop(process, say=say))
    for name in (RECORD_FILE, CLUSTER_FILE, CONTROLPLANE_FILE, NODEHOST_FILE):
        (state_dir / name).unlink(missing_ok=True)
