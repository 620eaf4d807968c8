"""``cdo sim up``: start NATS, the simulated cluster and cdo's services in the background.

Each step starts one program as its own background process with its log under
``<state dir>/logs/`` and waits until it answers: a nats-server with JetStream (unless a NATS
URL is given), ``python -m sim up`` (the API emulator, kubelets, scheduler, controllers),
``python -m services.nats_bootstrap`` (once: the stream and the bucket, as the
cdo-nats-bootstrap Job makes them on a real cluster), ``python -m sim.controlplane`` (cdo's
domain controller and clique allocator, with the CRDs
and the allocator's webhook registered) and ``python -m sim.nodehost`` (every node's IMEX agent
and health monitor). With ``racks`` the topology is generated (N NVL72 racks,
``<state dir>/topology.yaml``); with ``full_racks`` only those racks' nodes have a simulated
kubelet each and their services in the node host, the others are hollow (:mod:`sim.hollow`;
none: no node host runs). With ``nats_auth`` (``--nats-auth``) the nats-server runs the
nats-auth-callout component's configuration, and ``python -m services.nats_auth`` (the
authenticator) starts after the cluster and its identities, before any service
(:mod:`sim.control.natsauth`). The processes are recorded in ``<state dir>/cdo.json`` for
``down``; when a step fails, what was started is stopped again, newest first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.command_errors import CommandError, UsageError
from sim.control import natsauth
from sim.control.http import request
from sim.control.processes import (
    alive,
    free_port,
    http_ready,
    nats_ready,
    nats_server_binary,
    poll,
    spawn,
    stop,
    tail,
)
from sim.control.state import (
    CLUSTER_FILE,
    CONTROLPLANE_FILE,
    NODEHOST_FILE,
    RECORD_FILE,
    ClusterFile,
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
from sim.kubeapi import ServerConfig
from sim.kubeapi.config import release_settings
from sim.kubeapi.releases import NEWEST_RELEASE, ReleaseError
from sim.topology import DEFAULT_TOPOLOGY, TopologyError, load_topology
from sim.topology.generate import GENERATED_TOPOLOGY_FILE, nvl72_racks, write_topology

Say = Callable[[str], None]


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
    nats_auth: bool = False
    """NATS identities: the auth callout, the authenticator, every service with its own token."""
    kubernetes_version: str = NEWEST_RELEASE
    """The release the whole cluster runs at, with the two flags below as kube-apiserver's."""
    feature_gates: str = ""
    runtime_config: str = ""
    racks: int | None = None
    """Generate a topology of this many NVL72 racks (instead of ``topology``)."""
    full_racks: int | None = None
    """Only the first this many racks are full; the others' nodes are hollow (None: all full)."""

    @property
    def release_args(self) -> list[str]:
        """The release flags for ``python -m sim up``."""
        return [
            "--kubernetes-version", self.kubernetes_version,
            "--feature-gates", self.feature_gates,
            "--runtime-config", self.runtime_config,
        ]  # fmt: skip

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def topology_args(self) -> list[str]:
        return [] if self.topology is None else ["--topology", str(self.topology.resolve())]

    def hosted_nodes(self) -> str:
        """The node host's ``--nodes``: the full racks' nodes by name ("" : none), or
        ``nodes`` when every rack is full."""
        if self.full_racks is None:
            return self.nodes
        try:
            topology = load_topology(self.topology or DEFAULT_TOPOLOGY)
        except TopologyError as error:
            raise UsageError(f"bad topology: {error}") from None
        return ",".join(node.name for node in topology.first_racks(self.full_racks))


class _Starting:
    """What ``up`` started so far; stopped again, newest first, if a later step fails."""

    def __init__(self) -> None:
        self.processes: list[Started] = []

    def add(self, process: Started) -> Started:
        self.processes.append(process)
        return process

    def abort(self) -> None:
        for process in reversed(self.processes):
            stop(process, timeout_s=10)


def up(options: UpOptions, *, say: Say) -> None:
    state_dir = options.state_dir
    _check_options(options)
    state_dir.mkdir(parents=True, exist_ok=True)
    _check_not_running(state_dir)
    if options.racks is not None:
        path = write_topology(nvl72_racks(options.racks), state_dir / GENERATED_TOPOLOGY_FILE)
        options = dataclasses.replace(options, topology=path)
    started = _Starting()
    try:
        keys = natsauth.callout_keys(state_dir) if options.nats_auth else None
        nats_url = _start_nats(options, started, keys=keys, say=say)
        cluster = _start_cluster(options, started, say=say)
        auth = Auth()
        if keys is not None:
            auth = _start_authenticator(
                options, started, keys=keys, cluster=cluster, nats_url=nats_url, say=say
            )
        _bootstrap_nats(options, nats_url=nats_url, auth=auth, say=say)
        if options.services:
            _start_controlplane(options, started, nats_url=nats_url, say=say)
        hosted = options.hosted_nodes()
        host = None
        if hosted:
            host = _start_nodehost(
                options, started, hosted=hosted, nats_url=nats_url, auth=auth, say=say
            )
        else:
            say("node host        not started: every node is hollow (--full-racks 0)")
        write_record(
            state_dir,
            Record(
                processes=tuple(started.processes),
                nats_url=nats_url,
                kubeconfig=cluster.kubeconfig,
                nats_token_file=auth.reader_token_file,
                nats_auth_url=auth.probe_url,
            ),
        )
        if options.wait and host is not None:
            wait_nodes_ready(state_dir, host, timeout_s=options.timeout_s, say=say)
    except BaseException:
        started.abort()
        (state_dir / RECORD_FILE).unlink(missing_ok=True)
        raise
    say("")
    say(f"  kubectl --kubeconfig {cluster.kubeconfig} get nodes")
    token = f" CDO_NATS_TOKEN_FILE={auth.reader_token_file}" if auth.reader_token_file else ""
    say(f"  export KUBECONFIG={cluster.kubeconfig} CDO_NATS_URL={nats_url}{token}")
    say(f"  cdo status | cdo events --follow | cdo sim down      (state: {state_dir})")


@dataclass(frozen=True)
class Auth:
    """What the services and readers need of a system with NATS identities ("": none)."""

    reader_token_file: str = ""
    bootstrap_token_file: str = ""
    """The NATS bootstrap's token (it alone may create the stream and the bucket)."""
    probe_url: str = ""
    """The authenticator's probe and metrics URL."""


def _check_options(options: UpOptions) -> None:
    try:
        settings = release_settings(
            options.kubernetes_version, options.feature_gates, options.runtime_config
        )
        ServerConfig(**settings).release()
    except ReleaseError as error:
        raise UsageError(str(error)) from None
    if options.racks is not None and options.topology is not None:
        raise UsageError("--racks generates the topology: leave out --topology")
    if options.racks is not None and options.racks < 1:
        raise UsageError(f"--racks must be 1 or more, not {options.racks}")
    if options.full_racks is not None:
        if options.full_racks < 0:
            raise UsageError(f"--full-racks must be 0 or more, not {options.full_racks}")
        if options.nodes != "*":
            raise UsageError("--full-racks chooses the hosted nodes: leave out --nodes")
    if not options.nats_auth:
        return
    if options.nats_url is not None:
        raise UsageError(
            "--nats-auth starts its own nats-server with the auth callout; "
            "leave out --nats-url and CDO_NATS_URL"
        )


def _check_not_running(state_dir: Path) -> None:
    record = read_record(state_dir)
    if record is not None and any(alive(p.pid, p.marker) for p in record.processes):
        raise CommandError(
            f"a simulated cluster already runs in {state_dir} (cdo sim down stops it)"
        )
    cluster = read_cluster(state_dir)
    if cluster is not None and alive(cluster.pid, "-m sim"):
        raise CommandError(
            f"a simulated cluster (pid {cluster.pid}) already runs in {state_dir}, started "
            "outside cdo sim up; stop it first"
        )
    host = read_nodehost(state_dir)
    if host is not None and alive(host.pid, "-m sim.nodehost"):
        raise CommandError(
            f"a node host (pid {host.pid}) already runs in {state_dir}; stop it first"
        )
    # Left behind by processes that were killed: they would be taken for the new ones.
    for name in (CLUSTER_FILE, CONTROLPLANE_FILE, NODEHOST_FILE):
        (state_dir / name).unlink(missing_ok=True)


# -- the steps, in the order they run -----------------------------------------------------------


def _start_nats(
    options: UpOptions, started: _Starting, *, keys: natsauth.CalloutKeys | None, say: Say
) -> str:
    """The NATS URL: the one given, else that of a nats-server started here (with ``keys``,
    running the nats-auth-callout component's auth.conf)."""
    if options.nats_url is not None:
        say(f"NATS             {options.nats_url}  (not started here)")
        return options.nats_url
    port, monitor = free_port(4222), free_port()
    argv = [nats_server_binary()]
    if keys is not None:
        argv += ["--config", str(natsauth.AUTH_CONF)]
    argv += ["--jetstream", "--store_dir", str(options.state_dir / "nats")]
    argv += ["--addr", "127.0.0.1", "--port", str(port), "--http_port", str(monitor)]
    nats = started.add(
        spawn(
            "nats-server",
            argv,
            log=options.logs / "nats-server.log",
            marker="nats-server",
            env=keys.server_env() if keys is not None else None,
        )
    )
    if poll(lambda: nats_ready(monitor), timeout_s=30) is None:
        raise CommandError(f"nats-server did not become ready; see {nats.log}")
    url = f"nats://127.0.0.1:{port}"
    say(f"nats-server      {url}  (pid {nats.pid})")
    return url


def _start_cluster(options: UpOptions, started: _Starting, *, say: Say) -> ClusterFile:
    state_dir = options.state_dir
    # The node host runs NVIDIA's device plugin on every device-plugin node it hosts.
    argv = [sys.executable, "-m", "sim", "--state-dir", str(state_dir), "up", "--device-plugins"]
    argv += options.release_args
    if options.full_racks is not None:
        argv += ["--full-racks", str(options.full_racks)]
    sim = started.add(
        spawn(
            "simulated cluster",
            [*argv, *options.topology_args],
            log=options.logs / "sim.log",
            marker="-m sim --state-dir",
        )
    )
    _wait_for_file(
        state_dir / CLUSTER_FILE, sim, timeout_s=options.timeout_s, what="the cluster", say=say
    )
    cluster = require_cluster(state_dir)
    say(
        f"cluster          {cluster.api_url}  Kubernetes {cluster.kubernetes_version}  "
        f"(pid {sim.pid})"
    )
    return cluster


def _start_authenticator(
    options: UpOptions,
    started: _Starting,
    *,
    keys: natsauth.CalloutKeys,
    cluster: ClusterFile,
    nats_url: str,
    say: Say,
) -> Auth:
    """The identities (after the cluster, before any service connects) and
    ``python -m services.nats_auth``, until it answers ready."""
    prepared = asyncio.run(
        natsauth.prepare_identities(
            admin_kubeconfig=Path(cluster.kubeconfig), state_dir=options.state_dir
        )
    )
    port = free_port()
    process = started.add(
        spawn(
            "nats authenticator",
            [sys.executable, "-m", "services.nats_auth"],
            log=options.logs / "nats-auth.log",
            marker="-m services.nats_auth",
            env=natsauth.authenticator_env(prepared, keys, nats_url=nats_url, http_port=port),
        )
    )
    probe_url = f"http://127.0.0.1:{port}"

    def probe() -> bool | None:
        _raise_if_exited(process, what="the NATS authenticator")
        return http_ready(probe_url)

    if poll(probe, timeout_s=options.timeout_s, interval_s=0.2) is None:
        raise CommandError(
            f"the NATS authenticator was not ready within {options.timeout_s:.0f} s; "
            f"see {process.log}"
        )
    say(f"nats authenticator  {probe_url}  (pid {process.pid})")
    return Auth(
        reader_token_file=str(prepared.reader_token_file),
        bootstrap_token_file=str(prepared.bootstrap_token_file),
        probe_url=probe_url,
    )


NATS_BOOTSTRAP_TIMEOUT_S = 60.0


def _bootstrap_nats(options: UpOptions, *, nats_url: str, auth: Auth, say: Say) -> None:
    """``python -m services.nats_bootstrap``, once, as the cdo-nats-bootstrap Job runs it at
    install: the stream and the bucket, before any service binds to them."""
    env = {**os.environ, "CDO_NATS_URL": nats_url, "CDO_NATS_MAX_RECONNECT_ATTEMPTS": "30"}
    if auth.bootstrap_token_file:
        env["CDO_NATS_TOKEN_FILE"] = auth.bootstrap_token_file
    log = options.logs / "nats-bootstrap.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("w") as out:
            done = subprocess.run(
                [sys.executable, "-m", "services.nats_bootstrap"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=NATS_BOOTSTRAP_TIMEOUT_S,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise CommandError(
            f"the NATS bootstrap did not finish within {NATS_BOOTSTRAP_TIMEOUT_S:.0f} s; see {log}"
        ) from None
    if done.returncode != 0:
        raise CommandError(f"the NATS bootstrap failed; see {log}:\n{tail(str(log))}")
    summary = log.read_text().strip().splitlines()[-1:] or [""]
    say(f"nats bootstrap   {summary[0].removeprefix('nats-bootstrap: ')}")


def _start_controlplane(options: UpOptions, started: _Starting, *, nats_url: str, say: Say) -> None:
    state_dir = options.state_dir
    argv = [sys.executable, "-m", "sim.controlplane", "--state-dir", str(state_dir)]
    if options.nats_auth:
        argv.append("--nats-auth")
    process = started.add(
        spawn(
            "control plane",
            argv,
            log=options.logs / "controlplane.log",
            marker="-m sim.controlplane",
            env={"CDO_NATS_URL": nats_url},
        )
    )

    def probe() -> bool | None:
        _raise_if_exited(process, what="the control plane")
        info = read_controlplane(state_dir)
        return True if info is not None and info.ready else None

    progress = waiting(say, lambda: "the domain controller and clique allocator to be ready")
    if poll(probe, timeout_s=options.timeout_s, interval_s=0.3, progress=progress) is None:
        raise CommandError(
            f"the domain controller and clique allocator were not ready within "
            f"{options.timeout_s:.0f} s; see {options.logs}"
        )
    say(f"control plane    domain controller, clique allocator  (pid {process.pid})")


def _start_nodehost(
    options: UpOptions, started: _Starting, *, hosted: str, nats_url: str, auth: Auth, say: Say
) -> Started:
    argv = [sys.executable, "-m", "sim.nodehost", "--state-dir", str(options.state_dir)]
    argv += ["--nodes", hosted, *options.topology_args]
    nats_env = {}
    if options.nats_auth:
        # Each node's services connect with their own tokens; the host's own connection, which
        # publishes nothing, is a reader's.
        argv.append("--nats-auth")
        nats_env = {"CDO_NATS_TOKEN_FILE": auth.reader_token_file}
    if options.imex_server_port is not None:
        argv += ["--imex-server-port", str(options.imex_server_port)]
    if options.imex_cmd_port is not None:
        argv += ["--imex-cmd-port", str(options.imex_cmd_port)]
    host = started.add(
        spawn(
            "node host",
            argv,
            log=options.logs / "nodehost.log",
            marker="-m sim.nodehost",
            env={
                "CDO_NATS_URL": nats_url,
                **nats_env,
                "CDO_HTTP_HOST": os.environ.get("CDO_HTTP_HOST", "127.0.0.1"),
                "CDO_HTTP_PORT": os.environ.get("CDO_HTTP_PORT", "0"),
            },
        )
    )
    _wait_for_file(
        options.state_dir / NODEHOST_FILE,
        host,
        timeout_s=options.timeout_s,
        what="the node host",
        say=say,
    )
    return host


def wait_nodes_ready(state_dir: Path, host: Started, *, timeout_s: float, say: Say) -> None:
    """Until every powered node's IMEX daemon is ready, its Node object in sync and its GPU
    plugins registered (so that the nodes offer their GPUs)."""
    control = require_nodehost(state_dir).control_url

    counts = [0, 0]

    def probe() -> list[dict[str, Any]] | None:
        _raise_if_exited(host, what="the node host")
        nodes: list[dict[str, Any]] = request(control, "GET", "/nodes")
        ready = [n for n in nodes if n["powered"] is False or node_ready(n)]
        counts[:] = [len(ready), len(nodes)]
        return nodes if len(ready) == len(nodes) else None

    progress = waiting(
        say, lambda: f"the nodes' IMEX daemons and services: {counts[0]} of {counts[1]} ready"
    )
    nodes = poll(probe, timeout_s=timeout_s, interval_s=0.5, progress=progress)
    if nodes is None:
        raise CommandError(
            f"the nodes' services were not ready within {timeout_s:.0f} s; see {host.log}"
        )
    say(f"node host        {len(nodes)} nodes ready  (pid {host.pid})")


def node_ready(node: dict[str, Any]) -> bool:
    """A hosted node's entry (GET /nodes) says its services and GPU plugins are ready."""
    plugins = (node.get("gpu_plugin_registered"), node.get("device_plugin_registered"))
    return bool(node["imex_ready"] and node["node_synced"]) and False not in plugins


# -- waiting ------------------------------------------------------------------------------------


def _raise_if_exited(process: Started, *, what: str) -> None:
    if not alive(process.pid, process.marker):
        raise CommandError(
            f"{what} exited while starting; its log {process.log}:\n" + tail(process.log)
        )


def waiting(say: Say, what: Callable[[], str]) -> Callable[[float], None]:
    """A progress line for a long wait: ``  waiting for WHAT (12 s)``."""
    return lambda seconds: say(f"  waiting for {what()} ({seconds:.0f} s)")


def _wait_for_file(
    path: Path, process: Started, *, timeout_s: float, what: str, say: Say | None = None
) -> None:
    def probe() -> bool | None:
        if path.exists():
            return True
        _raise_if_exited(process, what=what)
        return None

    progress = waiting(say, lambda: f"{what} to start") if say is not None else None
    if poll(probe, timeout_s=timeout_s, progress=progress) is None:
        raise CommandError(f"{what} did not start within {timeout_s:.0f} s; see {process.log}")
