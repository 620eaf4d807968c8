"""Where the CLI finds the cluster and NATS, and connecting to them with short timeouts.

Each setting is taken from the first of: the command-line option, the environment, the
simulated cluster's state directory, a default:

| setting | option | environment | state directory | default |
|---|---|---|---|---|
| kubeconfig | ``--kubeconfig`` | ``KUBECONFIG`` (first existing path) | ``cluster.json`` | none |
| context | ``--context`` | | | the kubeconfig's current context |
| namespace | ``-n`` | | | the context's namespace, else ``default`` |
| NATS URL | ``--nats-url`` | ``CDO_NATS_URL`` | ``cdo.json`` | ``nats://127.0.0.1:4222`` |
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import yaml
from opentelemetry import trace

from shared.bus import EventBus, NatsSettings
from shared.bus.settings import client_settings
from shared.command_errors import UnreachableError, UsageError
from shared.errors import BusClosedError, ConfigError
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.metrics import Metrics
from sim.control.state import read_cluster, read_record
from sim.control.state import state_dir as resolve_state_dir

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
NATS_URL_ENV = "CDO_NATS_URL"
KUBECONFIG_ENV = "KUBECONFIG"
REQUEST_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Endpoints:
    """Where the cluster and NATS are, and where each answer came from (for messages)."""

    state_dir: Path
    kubeconfig: str | None
    kubeconfig_from: str
    nats_url: str
    nats_url_from: str
    context: str | None = None


def resolve(
    *,
    state_dir: Path,
    kubeconfig: str | None,
    nats_url: str | None,
    context: str | None = None,
) -> Endpoints:
    """Apply the precedence in the module docstring."""
    config, config_from = kubeconfig, "--kubeconfig"
    if not config:
        paths = [p for p in os.environ.get(KUBECONFIG_ENV, "").split(os.pathsep) if p]
        existing = [p for p in paths if Path(p).exists()]
        config = next(iter(existing or paths), None)
        config_from = f"${KUBECONFIG_ENV}"
    if not config:
        cluster = read_cluster(state_dir)
        config = cluster.kubeconfig if cluster is not None else None
        config_from = f"{state_dir}/cluster.json"
    url, url_from = nats_url, "--nats-url"
    if not url:
        url, url_from = os.environ.get(NATS_URL_ENV), f"${NATS_URL_ENV}"
    if not url:
        record = read_record(state_dir)
        url, url_from = (record.nats_url if record else None), f"{state_dir}/cdo.json"
    if not url:
        url, url_from = DEFAULT_NATS_URL, "the default"
    return Endpoints(
        state_dir=state_dir,
        kubeconfig=config,
        kubeconfig_from=config_from,
        nats_url=url,
        nats_url_from=url_from,
        context=context,
    )


def endpoints_from(args: argparse.Namespace) -> Endpoints:
    """The endpoints for the connection options on a parsed command line."""
    return resolve(
        state_dir=state_dir_from(args),
        kubeconfig=getattr(args, "kubeconfig", None),
        nats_url=getattr(args, "nats_url", None),
        context=getattr(args, "context", None),
    )


DEFAULT_NAMESPACE = "default"


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's context (``context``, else its current one), as kubectl
    takes it; ``default`` when the context names none or the file cannot be read."""
    if not kubeconfig:
        return DEFAULT_NAMESPACE
    try:
        document = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return DEFAULT_NAMESPACE
    if not isinstance(document, dict):
        return DEFAULT_NAMESPACE
    wanted = context or document.get("current-context")
    for entry in document.get("contexts") or ():
        if isinstance(entry, dict) and entry.get("name") == wanted:
            namespace = (entry.get("context") or {}).get("namespace")
            return str(namespace) if namespace else DEFAULT_NAMESPACE
    return DEFAULT_NAMESPACE


def namespace_from(args: argparse.Namespace, endpoints: Endpoints) -> str | None:
    """``-n``, else the context's namespace; None with ``-A`` (every namespace)."""
    if getattr(args, "all_namespaces", False):
        return None
    given = getattr(args, "namespace", None)
    return given or context_namespace(endpoints.kubeconfig, endpoints.context)


def state_dir_from(args: argparse.Namespace) -> Path:
    """``--state-dir``, else $CDO_SIM_STATE_DIR, else ``.cdo/sim``; absolute."""
    return resolve_state_dir(getattr(args, "state_dir", None))


# -- Kubernetes -------------------------------------------------------------------------------


async def connect_kube(endpoints: Endpoints) -> KubeClient:
    """A client for the cluster; UnreachableError when there is no usable kubeconfig."""
    if not endpoints.kubeconfig:
        raise UnreachableError(
            "no cluster to ask: pass --kubeconfig, set KUBECONFIG, or start the simulated "
            f"cluster (cdo sim up; looked in {endpoints.state_dir})"
        )
    if not await asyncio.to_thread(Path(endpoints.kubeconfig).is_file):
        raise UnreachableError(
            f"kubeconfig {endpoints.kubeconfig} (from {endpoints.kubeconfig_from}) does not exist"
        )
    try:
        return await KubeClient.connect(
            kubeconfig=endpoints.kubeconfig,
            context=endpoints.context,
            request_timeout_s=REQUEST_TIMEOUT_S,
        )
    except Exception as exc:  # the loader raises several unrelated types for a bad file
        raise UnreachableError(
            f"cannot use kubeconfig {endpoints.kubeconfig} (from {endpoints.kubeconfig_from}): "
            f"{exc}"
        ) from exc


def kube_unreachable(endpoints: Endpoints, error: KubeApiError) -> UnreachableError:
    return UnreachableError(
        f"the Kubernetes API does not answer (kubeconfig {endpoints.kubeconfig}, from "
        f"{endpoints.kubeconfig_from}): {error.message}"
    )


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
