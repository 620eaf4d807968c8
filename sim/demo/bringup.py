"""Starting and stopping the whole system for the demo, through ``cdo sim up`` / ``down``.

Everything runs as separate background processes (nats-server, the emulator with the simulated
nodes, the control plane with the domain controller and the clique allocator, the node host with
every node's IMEX agent and health monitor), recorded in the state directory so that ``down``
stops exactly those, and so that a second demo on the same directory refuses to start.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from shared.command_errors import CommandError
from sim import control as simctl
from sim.control.state import read_controlplane, read_record

DEFAULT_STATE_DIR = Path(".cdo") / "demo"

HEALTH_TIMINGS = {"CDO_HEALTH_XID_LATCH_S": "6", "CDO_HEALTH_HOLD_DOWN_S": "3"}
"""The health monitors' timings for the demo. A real node keeps the defaults (an XID counts as
active for 300 s, a node must stay healthy 30 s before its taint goes): a demo would otherwise
spend five minutes waiting for the recovery it wants to show."""


class BringUpError(Exception):
    """The system did not start; the message says why (and where its logs are)."""


@dataclass(frozen=True)
class Running:
    state_dir: Path
    kubeconfig: str
    nats_url: str
    pids: dict[str, int]
    """Every process the demo started, by name, the services inside the control plane too."""
    nats_token_file: str = ""
    """With NATS identities: the reader's token file, for the event feed."""

    def log(self, name: str) -> Path:
        return self.state_dir / "logs" / f"{name}.log"


def shorten_health_timings(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set the demo's health timings where the environment does not choose others; the values
    the node host will pass to the health monitors."""
    for key, value in HEALTH_TIMINGS.items():
        environ.setdefault(key, value)
    return {key: environ[key] for key in HEALTH_TIMINGS}


def _until_hints(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say`` for the lines ``up`` prints while starting; the how-to-connect lines it ends with
    (after an empty line) are left out: the demo prints its own at the end."""
    done = False

    def filtered(line: str) -> None:
        nonlocal done
        done = done or not line
        if not done:
            say(line)

    return filtered


def free_imex_ports() -> tuple[int, int]:
    """Two ports for the simulated IMEX daemons' peer and command sockets.

    Every simulated cluster of the same topology gives its nodes the same loopback addresses,
    so a second one on the machine (a test run, another demo with ``--keep``) would find the
    default ports 50000 and 50005 taken and its IMEX domains would never form. The demo takes
    two ports the kernel hands out instead, which nothing else on the machine is bound to.
    """
    with socket.socket() as first, socket.socket() as second:
        first.bind(("127.0.0.1", 0))
        second.bind(("127.0.0.1", 0))
        return first.getsockname()[1], second.getsockname()[1]


def bring_up(
    state_dir: Path, *, say: Callable[[str], None], timeout_s: float, nats_auth: bool = False
) -> Running:
    server_port, command_port = free_imex_ports()
    options = simctl.UpOptions(
        state_dir=state_dir,
        topology=None,  # two GB200 NVL72 racks of 18 trays
        nats_url=None,  # a nats-server of its own, in the state directory
        nodes="*",
        imex_server_port=server_port,
        imex_cmd_port=command_port,
        wait=True,
        timeout_s=timeout_s,
        nats_auth=nats_auth,
    )
    try:
        simctl.up(options, say=_until_hints(say))
    except CommandError as exc:
        raise BringUpError(str(exc)) from exc
    record = read_record(state_dir)
    if record is None:
        raise BringUpError(f"cdo sim up left no record in {state_dir}")
    pids = {process.name: process.pid for process in record.processes}
    controlplane = read_controlplane(state_dir)
    if controlplane is not None:
        pids.update({name: service.pid for name, service in controlplane.services.items()})
    return Running(
        state_dir=state_dir,
        kubeconfig=record.kubeconfig,
        nats_url=record.nats_url,
        pids=pids,
        nats_token_file=record.nats_token_file,
    )


def bring_down(state_dir: Path, *, say: Callable[[str], None]) -> None:
    """Stop what ``bring_up`` started there, newest first; nothing if it started nothing."""
    if read_record(state_dir) is not None:
        simctl.down(state_dir, say=say)


def log_tail(path: Path, lines: int = 15) -> list[str]:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return [f"(no log at {path})"]
    return [f"| {line}" for line in text[-lines:]]


def default_state_dir() -> Path:
    return Path(os.path.abspath(DEFAULT_STATE_DIR))
