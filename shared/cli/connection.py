"""Where the CLI finds the cluster and NATS, and connecting to them with short timeouts.

Each setting is taken from the first of: the command-line option, the environment, the
simulated cluster's state directory, a default:

| setting | option | environment | state directory | default |
|---|---|---|---|---|
| kubeconfig | ``--kubeconfig`` | ``KUBECONFIG`` (first existing path) | ``cluster.json`` | none |
| NATS URL | ``--nats-url`` | ``CDO_NATS_URL`` | ``cdo.json`` | ``nats://127.0.0.1:4222`` |
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import msgspec
from opentelemetry import trace

from shared.bus import EventBus, NatsSettings
from shared.cli.errors import UnreachableError, UsageError
from shared.cli.state import read_cluster, read_record
from shared.errors import BusClosedError, ConfigError
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.metrics import Metrics
from shared.settings import load_settings

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


def resolve(*, state_dir: Path, kubeconfig: str | None, nats_url: str | None) -> Endpoints:
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
    )


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
            kubeconfig=endpoints.kubeconfig, request_timeout_s=REQUEST_TIMEOUT_S
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
    """The CDO_NATS_* settings (stream and bucket names, credentials, TLS) with ``url`` and
    the CLI's own connection pacing."""
    try:
        base = load_settings(NatsSettings, prefix="CDO_NATS_")
    except ConfigError as exc:
        raise UsageError(f"invalid setting {exc}") from exc
    return msgspec.structs.replace(
        base,
        url=url,
        connect_timeout_s=2.0,
        reconnect_wait_s=0.5 if reconnect_forever else 0.2,
        # nats-py counts the first connection against the reconnect budget too: a budget of
        # one gives up on an unreachable server at once.
        max_reconnect_attempts=-1 if reconnect_forever else 1,
        manage_jetstream=False,
    )


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
