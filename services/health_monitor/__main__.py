"""The health monitor process of one GPU node (a DaemonSet pod).

python -m services.health_monitor              # run (settings from CDO_* variables)
python -m services.health_monitor --settings   # list its CDO_HEALTH_* settings
python -m services.health_monitor --version    # its version; --help: its command line
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from services.health_monitor.monitor import HealthMonitor
from services.health_monitor.settings import (
    ENV_PREFIX,
    describe,
    load_classifier,
    load_monitor_settings,
    load_service_settings,
)
from shared.errors import ConfigError
from shared.kube.access import NoClusterError, find_cluster
from shared.kube.client import KubeClient
from shared.kube.recorder import EventRecorder
from shared.kubeletapi.podresources import PodResourcesClient
from shared.nvml import PynvmlNvml
from shared.runtime import ServiceContext, run_service
from shared.runtime.arguments import parse_service_arguments
from shared.runtime.service import EXIT_CONFIG
from shared.settings import env_name

COMPONENT = "health-monitor"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_service_arguments(
        COMPONENT, module="services.health_monitor", doc=__doc__ or "", argv=argv
    )
    if arguments.list_settings:
        print(describe())
        return 0
    try:
        service = load_service_settings()
        settings = load_monitor_settings()
        classifier = load_classifier()
    except ConfigError as exc:
        print(f"{COMPONENT}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG
    variable = env_name(ENV_PREFIX, ("kubeconfig",))
    try:
        source = find_cluster(service.kubeconfig, variable=variable)
    except NoClusterError as exc:
        print(f"{COMPONENT}: no Kubernetes API: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def setup(ctx: ServiceContext) -> None:
        client = await KubeClient.connect_to(source, request_timeout_s=service.request_timeout_s)
        client.count_requests(ctx.metrics)
        ctx.supervisor.on_shutdown("close kube client", client.close, phase="final")
        ctx.metrics_access.use(client)
        recorder = (
            EventRecorder(client, component=COMPONENT, instance=ctx.instance, metrics=ctx.metrics)
            if settings.kube_events
            else None
        )
        pod_resources = (
            PodResourcesClient(service.pod_resources_socket)
            if service.pod_resources_socket
            else None
        )
        if pod_resources is not None:
            ctx.supervisor.on_shutdown("close pod resources", pod_resources.close, phase="final")
        monitor = HealthMonitor(
            node_name=service.node_name,
            nvml=PynvmlNvml(),
            client=client,
            publisher=ctx.bus,
            metrics=ctx.metrics,
            settings=settings,
            classifier=classifier,
            tracer=ctx.tracer,
            recorder=recorder,
            pod_resources=pod_resources,
        )
        ctx.readiness.add("nvml", lambda: monitor.nvml_available)
        ctx.readiness.add("node synced", lambda: monitor.node_synced)
        ctx.supervisor.start("health monitor", monitor.run())

    return run_service(COMPONENT, setup)


if __name__ == "__main__":
    raise SystemExit(main())
