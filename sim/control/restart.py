"""Faults by hand on a running simulated cluster: ``cdo sim restart``, ``cdo sim nats stop|start``.

- ``restart control-plane`` and ``restart node-host`` stop the program ``cdo sim up`` started
  (SIGTERM, as a rollout or a drain stops a pod: the services shut down in order) and start it
  again with the command line and environment it ran with, then wait until it is ready again
  (for the node host: every powered node's services ready; its nodes' clocks are right again);
- ``restart api`` kills the API server (SIGKILL, as a crash) and starts it again on the same
  port from its data directory (the cluster's control API, ``POST /api/restart``): the same
  objects and resourceVersions, no watch history, so every informer relists or resumes;
- ``nats stop`` stops the nats-server ``cdo sim up`` started and keeps how it ran in
  ``<state dir>/nats-stopped.json``; ``nats start`` starts it again the same way: the same port,
  the same JetStream store, so the stream and the key-value bucket are as they were.

Each updates ``cdo.json``, so ``cdo sim down`` stops what runs now.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from shared.command_errors import CommandError, UsageError
from sim.control.http import request
from sim.control.processes import Command, alive, poll, respawn, stop
from sim.control.state import (
    CONTROLPLANE_FILE,
    NODEHOST_FILE,
    Record,
    Started,
    read_controlplane,
    read_nodehost,
    read_record,
    require_cluster,
)
from sim.control.up import wait_nodes_ready

Say = Callable[[str], None]

CONTROL_PLANE = "control-plane"
NODE_HOST = "node-host"
API = "api"
RESTARTABLE = (CONTROL_PLANE, NODE_HOST, API)
MARKERS = {CONTROL_PLANE: "-m sim.controlplane", NODE_HOST: "-m sim.nodehost"}
NATS_MARKER = "nats-server"
NATS_STOPPED_FILE = "nats-stopped.json"
READY_TIMEOUT_S = 180.0


class _Stopped(msgspec.Struct, frozen=True, kw_only=True):
    """A nats-server stopped by ``cdo sim nats stop``: how to start it again."""

    process: Started
    command: Command


def restart(
    state_dir: Path, component: str, *, say: Say, timeout_s: float = READY_TIMEOUT_S
) -> None:
    if component == API:
        cluster = require_cluster(state_dir)
        answer = request(cluster.control_url, "POST", "/api/restart", timeout_s=timeout_s)
        say(f"API server restarted at {answer['url']} (pid {answer['pid']})")
        return
    if component not in MARKERS:
        raise UsageError(f"restart what? one of {', '.join(RESTARTABLE)} (got {component!r})")
    record = _record(state_dir)
    process = _running(record, MARKERS[component], what=component)
    command = Command.of(process.pid)
    # Its state file goes with it: the new one is written once the new process serves.
    say(stop(process))
    (state_dir / (CONTROLPLANE_FILE if component == CONTROL_PLANE else NODEHOST_FILE)).unlink(
        missing_ok=True
    )
    started = respawn(state_dir, process, command)
    ready = _controlplane_ready if component == CONTROL_PLANE else _nodehost_serving
    if poll(lambda: ready(state_dir, started), timeout_s=timeout_s, interval_s=0.3) is None:
        raise CommandError(f"{component} was not ready within {timeout_s:.0f} s; see {started.log}")
    if component == NODE_HOST:
        wait_nodes_ready(state_dir, started, timeout_s=timeout_s, say=say)
    say(f"{component} restarted (pid {started.pid})")


def nats_stop(state_dir: Path, *, say: Say) -> None:
    process = _running(_record(state_dir), NATS_MARKER, what="the nats-server cdo sim up started")
    stopped = _Stopped(process=process, command=Command.of(process.pid))
    (state_dir / NATS_STOPPED_FILE).write_bytes(msgspec.json.encode(stopped))
    say(stop(process))


def nats_start(state_dir: Path, *, say: Say) -> None:
    record = _record(state_dir)  # cdo sim up's system still runs here
    try:
        stopped = msgspec.json.decode((state_dir / NATS_STOPPED_FILE).read_bytes(), type=_Stopped)
    except FileNotFoundError:
        raise CommandError(
            f"no nats-server was stopped with cdo sim nats stop in {state_dir}"
        ) from None
    if alive(stopped.process.pid, stopped.process.marker):
        raise CommandError(f"the nats-server (pid {stopped.process.pid}) runs already")
    started = respawn(state_dir, stopped.process, stopped.command)
    (state_dir / NATS_STOPPED_FILE).unlink()
    say(f"started nats-server again at {record.nats_url} (pid {started.pid})")


# -- the record --------------------------------------------------------------------------------


def _record(state_dir: Path) -> Record:
    record = read_record(state_dir)
    if record is None:
        raise CommandError(f"nothing started by cdo sim up runs in {state_dir}")
    return record


def _running(record: Record, marker: str, *, what: str) -> Started:
    for process in record.processes:
        if process.marker == marker:
            if not alive(process.pid, process.marker):
                raise CommandError(f"{what} (pid {process.pid}) is not running")
            return process
    raise CommandError(f"cdo sim up did not start {what} here")


def _controlplane_ready(state_dir: Path, started: Started) -> bool | None:
    _raise_if_exited(started)
    info = read_controlplane(state_dir)
    return True if info is not None and info.pid == started.pid and info.ready else None


def _nodehost_serving(state_dir: Path, started: Started) -> bool | None:
    _raise_if_exited(started)
    host = read_nodehost(state_dir)
    return True if host is not None and host.pid == started.pid else None


def _raise_if_exited(started: Started) -> None:
    if not alive(started.pid, started.marker):
        raise CommandError(f"{started.name} exited while starting; see {started.log}")
