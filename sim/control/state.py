"""The simulated cluster's state directory: the files its programs write there, read back.

Four files say what runs there, so that a later command (``cdo status``, ``cdo sim down``,
``python -m sim power``) finds the running programs without being their parent:

- ``cluster.json``, written by ``python -m sim up``: kubeconfig, API URL, control URL, pid,
  and the Kubernetes release simulated (version, feature gates, runtime config);
- ``nodehost.json``, written by ``python -m sim.nodehost``: control URL, pid, hosted nodes;
- ``controlplane.json``, written by ``python -m sim.controlplane``: the domain controller's and
  the clique allocator's pids and probe URLs, and whether both are ready;
- ``cdo.json``, written by ``cdo sim up``: the processes it started (so ``cdo sim down`` stops
  exactly those), the NATS URL and where the logs are, and with NATS identities a reader's
  token file and the authenticator's URL.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

import msgspec

from shared.command_errors import CommandError, UnreachableError
from sim.kubeapi.releases import NEWEST_RELEASE, Release

DEFAULT_STATE_DIR = Path(".cdo") / "sim"
STATE_DIR_ENV = "CDO_SIM_STATE_DIR"
CLUSTER_FILE = "cluster.json"
NODEHOST_FILE = "nodehost.json"
CONTROLPLANE_FILE = "controlplane.json"
RECORD_FILE = "cdo.json"
ACCESS_RECORD_FILE = "access.json"
API_DATA_DIR = "apiserver"
"""The API emulator's data directory (its objects and keys), kept across ``cdo sim restart api``."""
"""The API emulator's access record (``sim.kubeapi.auth.usage``), kept by ``python -m sim up``."""
AUDIT_LOG_FILE = "logs/kube-apiserver-audit.log"
"""The API emulator's audit log: a JSON line per request an admission policy audited
(``sim.kubeapi.admission.auditlog``), kept by ``python -m sim up``."""
IDENTITIES_DIR = "identities"
"""Each cdo service's kubeconfig: ``<service account>.kubeconfig``, and for the per-node
services ``<service account>/<node>.kubeconfig``."""

T = TypeVar("T")


class ClusterFile(msgspec.Struct, frozen=True, kw_only=True):
    """``cluster.json``: where the running ``python -m sim up`` serves, and the Kubernetes
    release it simulates (so that the node host's simulated drivers run at the same one)."""

    kubeconfig: str
    api_url: str
    control_url: str
    pid: int
    kubernetes_version: str = NEWEST_RELEASE
    feature_gates: dict[str, bool] = msgspec.field(default_factory=dict)
    runtime_config: dict[str, bool] = msgspec.field(default_factory=dict)

    def release(self) -> Release:
        return Release.of(
            self.kubernetes_version,
            feature_gates=self.feature_gates,
            runtime_config=self.runtime_config,
        )


class NodeHostFile(msgspec.Struct, frozen=True, kw_only=True):
    control_url: str
    pid: int
    nodes: tuple[str, ...] = ()


class ControlPlaneService(msgspec.Struct, frozen=True, kw_only=True):
    pid: int
    probe_url: str
    restarts: int = 0
    started_at: float = 0.0
    """When this process started (``time.time()``)."""


class ControlPlaneFile(msgspec.Struct, frozen=True, kw_only=True):
    pid: int
    ready: bool
    services: dict[str, ControlPlaneService] = msgspec.field(default_factory=dict)


class Started(msgspec.Struct, frozen=True, kw_only=True):
    """One process ``cdo sim up`` started."""

    name: str
    pid: int
    marker: str
    """A word of its command line, checked before it is signalled (pids are reused)."""
    log: str = ""


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """What ``cdo sim up`` started, newest last; ``cdo sim down`` stops them in reverse."""

    processes: tuple[Started, ...] = ()
    nats_url: str = ""
    kubeconfig: str = ""
    nats_token_file: str = ""
    """With NATS identities (``--nats-auth``): a reader's token file for CDO_NATS_TOKEN_FILE."""
    nats_auth_url: str = ""
    """With NATS identities: the authenticator's probe and metrics URL."""


def state_dir(given: Path | None) -> Path:
    """``--state-dir``, else $CDO_SIM_STATE_DIR, else ``.cdo/sim``; absolute."""
    if given is not None:
        return given.resolve()
    from_env = os.environ.get(STATE_DIR_ENV)
    return Path(from_env).resolve() if from_env else DEFAULT_STATE_DIR.resolve()


def _read(path: Path, kind: type[T]) -> T | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=kind)
    except FileNotFoundError:
        return None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CommandError(f"{path}: unreadable ({exc}); remove it if nothing runs there") from exc


def read_cluster(directory: Path) -> ClusterFile | None:
    return _read(directory / CLUSTER_FILE, ClusterFile)


def read_nodehost(directory: Path) -> NodeHostFile | None:
    return _read(directory / NODEHOST_FILE, NodeHostFile)


def read_controlplane(directory: Path) -> ControlPlaneFile | None:
    return _read(directory / CONTROLPLANE_FILE, ControlPlaneFile)


def read_record(directory: Path) -> Record | None:
    return _read(directory / RECORD_FILE, Record)


def _write(path: Path, content: msgspec.Struct) -> None:
    """Whole or not at all: a reader never sees half a file."""
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(msgspec.json.encode(content))
    temporary.replace(path)


def write_record(directory: Path, record: Record) -> None:
    _write(directory / RECORD_FILE, record)


def write_cluster(directory: Path, cluster: ClusterFile) -> None:
    _write(directory / CLUSTER_FILE, cluster)


def require_cluster(directory: Path) -> ClusterFile:
    cluster = read_cluster(directory)
    if cluster is None:
        raise UnreachableError(
            f"no simulated cluster runs in {directory} (start one: cdo sim up, or pass --state-dir)"
        )
    return cluster


def require_nodehost(directory: Path) -> NodeHostFile:
    host = read_nodehost(directory)
    if host is None:
        raise UnreachableError(
            f"no node host runs in {directory}: nothing hosts the nodes' NVML "
            "(cdo sim up starts one; so does python -m sim.nodehost)"
        )
    return host
