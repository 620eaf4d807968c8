"""Where the CLI finds the cluster and NATS, and connecting to them with short timeouts.

The cluster is found as kubectl finds it (client-go's loading rules, :mod:`shared.kube.kubeconfig`),
with the simulated cluster's state directory fitted in; the first that applies wins:

1. ``--kubeconfig FILE``: that one file, which must exist;
2. ``KUBECONFIG``, set and not empty: its files, merged (a list where none exists is an error);
3. the simulated cluster of ``--state-dir`` or ``CDO_SIM_STATE_DIR``, when one of them is given
   and a cluster runs there (``cluster.json``);
4. ``~/.kube/config``, when it exists;
5. the pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT`` set, the token mounted);
6. the simulated cluster of ``.cdo/sim``, when one runs there.

``--context`` picks a context of the kubeconfig (default: its ``current-context``); the
namespace of the commands that take ``-n`` is the context's (in a pod: the service account's),
else ``default``. NATS: ``--nats-url``, ``CDO_NATS_URL``, the state directory's ``cdo.json``,
``nats://127.0.0.1:4222``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry import trace

from shared.bus import EventBus, NatsSettings
from shared.bus.settings import client_settings
from shared.command_errors import UnreachableError, UsageError
from shared.errors import BusClosedError, ConfigError
from shared.kube import kubeconfig as kubeconfig_files
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.kubeconfig import ClusterSource
from shared.metrics import Metrics

if TYPE_CHECKING:
    from types import ModuleType


def _simulator() -> ModuleType | None:
    """The simulator's state-directory module; None where the simulator is not installed (the
    image, which runs ``cdo ui`` in a pod: no simulated cluster to find there)."""
    try:
        from sim.control import state
    except ImportError:
        return None
    return state


DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
NATS_URL_ENV = "CDO_NATS_URL"
KUBECONFIG_ENV = kubeconfig_files.KUBECONFIG_ENV
REQUEST_TIMEOUT_S = 5.0
NO_CLUSTER_HINT = (
    "pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or start the simulated cluster"
)


@dataclass(frozen=True)
class Endpoints:
    """Where the cluster and NATS are, and where each answer came from (for messages)."""

    state_dir: Path
    cluster: ClusterSource | None
    """None: nothing names a cluster, or what names one cannot be used (``cluster_problem``)."""
    nats_url: str
    nats_url_from: str
    cluster_problem: str = ""

    @property
    def context(self) -> str | None:
        return self.cluster.context if self.cluster is not None else None


def find_cluster(
    *,
    state_dir: Path,
    explicit_state_dir: bool,
    kubeconfig_file: str | None,
    context: str | None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = kubeconfig_files.SERVICE_ACCOUNT_DIR,
) -> tuple[ClusterSource | None, str]:
    """The cluster the precedence in the module docstring picks, or None and why not."""
    environ = os.environ if environ is None else environ
    if kubeconfig_file:
        return ClusterSource((Path(kubeconfig_file),), "--kubeconfig", context), ""
    listed = environ.get(KUBECONFIG_ENV, "")
    if listed:
        files = kubeconfig_files.existing(kubeconfig_files.env_paths(listed))
        if not files:
            return None, f"{KUBECONFIG_ENV}={listed!r} names no kubeconfig file that exists"
        return ClusterSource(files, f"${KUBECONFIG_ENV}", context), ""
    if explicit_state_dir and (simulated := _simulated(state_dir, context)) is not None:
        return simulated, ""
    home = kubeconfig_files.home_kubeconfig(environ)
    if home.is_file():
        return ClusterSource((home,), "~/.kube/config", context), ""
    if kubeconfig_files.in_cluster_possible(environ, service_account_dir=service_account_dir):
        if context:
            return None, f"--context {context}: in a pod without a kubeconfig there are no contexts"
        return kubeconfig_files.in_cluster(environ, service_account_dir=service_account_dir), ""
    if not explicit_state_dir and (simulated := _simulated(state_dir, context)) is not None:
        return simulated, ""
    return None, f"no cluster to ask: {NO_CLUSTER_HINT} (cdo sim up; looked in {state_dir})"


def _simulated(state_dir: Path, context: str | None) -> ClusterSource | None:
    simulator = _simulator()
    cluster = simulator.read_cluster(state_dir) if simulator is not None else None
    if cluster is None or not cluster.kubeconfig:
        return None
    return ClusterSource((Path(cluster.kubeconfig),), f"{state_dir}/cluster.json", context)


def resolve(
    *,
    state_dir: Path,
    kubeconfig: str | None,
    nats_url: str | None,
    context: str | None = None,
    explicit_state_dir: bool = True,
) -> Endpoints:
    """Apply the precedence in the module docstring."""
    cluster, problem = find_cluster(
        state_dir=state_dir,
        explicit_state_dir=explicit_state_dir,
        kubeconfig_file=kubeconfig,
        context=context,
    )
    url, url_from = nats_url, "--nats-url"
    if not url:
        url, url_from = os.environ.get(NATS_URL_ENV, ""), f"${NATS_URL_ENV}"
    if not url:
        simulator = _simulator()
        record = simulator.read_record(state_dir) if simulator is not None else None
        url, url_from = (record.nats_url if record else ""), f"{state_dir}/cdo.json"
    if not url:
        url, url_from = DEFAULT_NATS_URL, "the default"
    return Endpoints(
        state_dir=state_dir,
        cluster=cluster,
        cluster_problem=problem,
        nats_url=url,
        nats_url_from=url_from,
    )


def endpoints_from(args: argparse.Namespace) -> Endpoints:
    """The endpoints for the connection options on a parsed command line."""
    return resolve(
        state_dir=state_dir_from(args),
        explicit_state_dir=(
            getattr(args, "state_dir", None) is not None
            or bool((simulator := _simulator()) and os.environ.get(simulator.STATE_DIR_ENV))
        ),
        kubeconfig=getattr(args, "kubeconfig", None),
        nats_url=getattr(args, "nats_url", None),
        context=getattr(args, "context", None),
    )


DEFAULT_NAMESPACE = "default"


def context_namespace(cluster: ClusterSource | None) -> str:
    """The namespace of the cluster's context as kubectl takes it: the context's ``namespace``
    (in a pod, the service account's); ``default`` when it names none or cannot be read."""
    if cluster is None:
        return DEFAULT_NAMESPACE
    if cluster.in_cluster:
        try:
            namespace = (cluster.service_account_dir / "namespace").read_text().strip()
        except OSError:
            return DEFAULT_NAMESPACE
        return namespace or DEFAULT_NAMESPACE
    try:
        config = kubeconfig_files.load(cluster.files)
    except kubeconfig_files.KubeconfigError:
        return DEFAULT_NAMESPACE
    body = kubeconfig_files.context_of(config, cluster.context) or {}
    named = body.get("namespace")
    return str(named) if named else DEFAULT_NAMESPACE


def namespace_from(args: argparse.Namespace, endpoints: Endpoints) -> str | None:
    """``-n``, else the context's namespace; None with ``-A`` (every namespace)."""
    if getattr(args, "all_namespaces", False):
        return None
    given = getattr(args, "namespace", None)
    return given or context_namespace(endpoints.cluster)


def state_dir_from(args: argparse.Namespace) -> Path:
    """``--state-dir``, else $CDO_SIM_STATE_DIR, else ``.cdo/sim``; absolute."""
    given = getattr(args, "state_dir", None)
    simulator = _simulator()
    if simulator is None:
        return Path(given or ".").absolute()
    resolved: Path = simulator.state_dir(given)
    return resolved


def connection_options() -> argparse.ArgumentParser:
    """Connection options, accepted before and after the command (SUPPRESS keeps the first)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection")
    group.add_argument(
        "--state-dir",
        type=Path,
        default=argparse.SUPPRESS,
        help="the simulated cluster's state directory (default: $CDO_SIM_STATE_DIR or .cdo/sim)",
    )
    group.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="kubeconfig of the cluster (default: as kubectl finds it: $KUBECONFIG, "
        "~/.kube/config, the pod's service account; or the simulated cluster)",
    )
    group.add_argument(
        "--context",
        default=argparse.SUPPRESS,
        help="the kubeconfig context to use (default: its current context)",
    )
    group.add_argument(
        "--nats-url",
        default=argparse.SUPPRESS,
        help="NATS server (default: $CDO_NATS_URL, else the one cdo sim up started, else "
        "nats://127.0.0.1:4222)",
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log to stderr"
    )
    return common


# -- Kubernetes -------------------------------------------------------------------------------


async def connect_kube(endpoints: Endpoints) -> KubeClient:
    """A client for the cluster; UnreachableError when there is no usable kubeconfig."""
    cluster = endpoints.cluster
    if cluster is None:
        raise UnreachableError(endpoints.cluster_problem or f"no cluster to ask: {NO_CLUSTER_HINT}")
    if not cluster.in_cluster and not await asyncio.to_thread(
        kubeconfig_files.existing, cluster.files
    ):
        raise UnreachableError(f"{cluster.describe()} does not exist")
    try:
        return await KubeClient.connect_to(cluster, request_timeout_s=REQUEST_TIMEOUT_S)
    except Exception as exc:  # the loader raises several unrelated types for a bad file
        raise UnreachableError(f"cannot use {cluster.describe()}: {exc}") from exc


def kube_unreachable(endpoints: Endpoints, error: KubeApiError) -> UnreachableError:
    where = endpoints.cluster.describe() if endpoints.cluster is not None else "no cluster"
    return UnreachableError(f"the Kubernetes API does not answer ({where}): {error.message}")


# -- NATS -------------------------------------------------------------------------------------


def nats_settings(url: str, *, reconnect_forever: bool = False) -> NatsSettings:
    """The CDO_NATS_* settings with ``url`` and a command's pacing; UsageError when invalid."""
    try:
        return client_settings(url, reconnect_forever=reconnect_forever)
    except ConfigError as exc:
        raise UsageError(f"invalid setting {exc}") from exc


async def _connect(url: str, *, reconnect_forever: bool) -> EventBus:
    bus = EventBus(
        nats_settings(url, reconnect_forever=reconnect_forever),
        service="cdo-cli",
        instance=socket.gethostname(),
        metrics=Metrics(),
        tracer=trace.get_tracer("cdo-cli"),
    )
    await bus.connect()
    return bus


async def connect_nats(endpoints: Endpoints, *, reconnect_forever: bool = False) -> EventBus:
    """A connected bus; UnreachableError when NATS does not answer.

    With ``reconnect_forever`` (following a stream) a lost connection is retried without end;
    the server must still answer the first attempt, so a wrong URL fails at once.
    """
    url = endpoints.nats_url
    try:
        if reconnect_forever:
            probe = await _connect(url, reconnect_forever=False)
            await probe.close()
        return await _connect(url, reconnect_forever=reconnect_forever)
    except BusClosedError as exc:
        raise UnreachableError(
            f"NATS at {url} (from {endpoints.nats_url_from}) does not answer; pass --nats-url "
            f"or set {NATS_URL_ENV}"
        ) from exc


def quiet_logging(verbose: bool) -> None:
    """Library warnings (reconnects, retries) on stderr only with ``--verbose``."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.CRITICAL,
        format="%(levelname)s %(name)s: %(message)s",
    )
