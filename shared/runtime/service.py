"""The life of a cdo service process: what every composition root shares.

    def main() -> None:
        raise SystemExit(run_service("domain-controller", setup))

    async def setup(ctx: ServiceContext) -> None:
        await ctx.bus.subscribe(..., handler)
        ctx.supervisor.start("reconciler", reconciler.run())

``run_service`` reads RuntimeSettings from CDO_* variables (exit 2 with one line naming the
variable when one is invalid, a NATS URL that cannot be connected to included), sets up JSON
logging, tracing and metrics, starts the probe server (/healthz, /readyz, /metrics), starts the
bus under supervision (it connects in the background and retries forever), calls ``setup`` and
then supervises until SIGTERM/SIGINT (exit 0) or the first fatal error (exit 1).

NATS is never waited for: ``setup`` runs at once, and readiness does not depend on NATS. The
condition ``nats`` (listed under ``degraded`` by /readyz while the feed is down) and the gauge
``cdo_bus_connected`` say whether the event feed is up.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated

from msgspec import Meta
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from shared.bus import EventBus, NatsSettings
from shared.bus.settings import nats_url_problem
from shared.errors import ConfigError
from shared.metrics import Metrics
from shared.runtime.http import ProbeServer
from shared.runtime.logs import configure_logging
from shared.runtime.metricsaccess import MetricsAccess
from shared.runtime.probes import Readiness
from shared.runtime.supervisor import Supervisor
from shared.settings import Settings, load_settings
from shared.tracing import INSTRUMENTATION_NAME, TracingSettings, setup_tracing

EXIT_CONFIG = 2
FEED_CONDITION = "nats"
"""The readiness condition (reported, never required) that says the event feed is up."""
log = logging.getLogger("cdo.runtime")


class RuntimeSettings(Settings, frozen=True, kw_only=True):
    """What every service reads from CDO_* environment variables."""

    instance: Annotated[
        str, Meta(description="Instance name (pod name); defaults to the host name.")
    ] = ""
    log_level: Annotated[
        str,
        Meta(
            description="debug | info | warning | error.",
            pattern="(?i)^(debug|info|warning|error)$",
        ),
    ] = "info"
    http_host: Annotated[str, Meta(description="Address of the probe/metrics server.")] = "0.0.0.0"
    http_port: Annotated[
        int,
        Meta(description="Port of the probe/metrics server (0: any free port).", ge=0, le=65535),
    ] = 8080
    metrics_auth: Annotated[
        bool,
        Meta(
            description="Serve /metrics only to callers whose bearer token the API server "
            "authenticates (TokenReview) and authorises for get on /metrics "
            "(SubjectAccessReview); ClusterRole cdo-metrics-reader grants it.",
        ),
    ] = False
    shutdown_step_timeout_s: Annotated[
        float, Meta(description="Longest wait for one shutdown step.", gt=0)
    ] = 10.0
    nats: NatsSettings = NatsSettings()
    tracing: TracingSettings = TracingSettings()


@dataclass(frozen=True)
class ServiceContext:
    """Everything a service's setup needs, built by the runtime."""

    name: str
    instance: str
    settings: RuntimeSettings
    metrics: Metrics
    readiness: Readiness
    tracer_provider: TracerProvider
    tracer: Tracer
    bus: EventBus
    supervisor: Supervisor
    metrics_access: MetricsAccess
    """Give it the service's API client (``use``) once there is one, when metrics_auth is on:
    until then /metrics answers 503."""


Setup = Callable[[ServiceContext], Awaitable[None]]


async def serve(name: str, settings: RuntimeSettings, setup: Setup) -> int:
    """Run the service until it stops; returns the process exit code."""
    instance = settings.instance or socket.gethostname()
    metrics = Metrics(service=name)
    readiness = Readiness()
    provider = setup_tracing(service=name, instance=instance, settings=settings.tracing)
    tracer = provider.get_tracer(INSTRUMENTATION_NAME)
    supervisor = Supervisor(step_timeout_s=settings.shutdown_step_timeout_s)
    bus = EventBus(settings.nats, service=name, instance=instance, metrics=metrics, tracer=tracer)
    readiness.add_condition(FEED_CONDITION, lambda: bus.is_connected)
    access = MetricsAccess(required=settings.metrics_auth, registry=metrics.registry)
    probes = ProbeServer(
        readiness=readiness,
        metrics=metrics,
        host=settings.http_host,
        port=settings.http_port,
        access=access,
    )
    await probes.start()
    log.info("probe server listening", extra={"port": probes.bound_port, "instance": instance})

    context = ServiceContext(
        name=name,
        instance=instance,
        settings=settings,
        metrics=metrics,
        readiness=readiness,
        tracer_provider=provider,
        tracer=tracer,
        bus=bus,
        supervisor=supervisor,
        metrics_access=access,
    )
    supervisor.on_shutdown("unready", readiness.mark_stopping, phase="intake")
    supervisor.on_shutdown("stop bus intake", bus.stop_intake, phase="intake")
    supervisor.on_shutdown("drain bus", bus.close, phase="drain")
    supervisor.on_shutdown("flush traces", lambda: _flush_traces(provider), phase="final")
    supervisor.on_shutdown("stop probe server", probes.stop, phase="final")

    async def startup() -> None:
        # The bus connects on its own time; nothing below waits for NATS.
        supervisor.start("bus", bus.run())
        await setup(context)
        log.info("service started")

    supervisor.start("startup", startup(), until_stop=False)
    return await supervisor.run()


async def _flush_traces(provider: TracerProvider) -> None:
    # The SDK flushes in a worker thread; keep the event loop free meanwhile.
    await asyncio.to_thread(provider.shutdown)


def run_service(name: str, setup: Setup, *, environ: Mapping[str, str] | None = None) -> int:
    """Composition-root entry point: run service ``name`` and return its exit code."""
    try:
        settings = load_settings(RuntimeSettings, prefix="CDO_", environ=environ)
    except ConfigError as exc:
        print(f"{name}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if (problem := nats_url_problem(settings.nats.url)) is not None:
        print(f"{name}: invalid setting CDO_NATS_URL: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(service=name, level=settings.log_level)
    return asyncio.run(serve(name, settings, setup))
