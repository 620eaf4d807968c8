"""The ``main()`` every Kubernetes-facing service shares: its command line, settings, API client.

    def main() -> int:
        return kube_service_main(
            COMPONENT, module="services.<name>", doc=__doc__, prefix=ENV_PREFIX,
            describe=describe, load=load, start=start,
        )

``--help``, ``--version`` and ``--settings`` print and exit; an unknown argument, an invalid
setting or no API server to reach ends the process before it starts, with one line that names
the variable to set (exit 2). The API server is found as client-go controllers find theirs
(:func:`shared.kube.access.find_cluster`).

With ``requires_dra`` (a service that cannot work without DRA), the server's discovery is asked
for DRA's ``resource.k8s.io/v1`` once the client is connected and before ``start``: a server
without it ends the process with exit code 2 (:mod:`shared.runtime.required`).

``start(ctx, client, settings)`` wires the service into the runtime, closing of the API client
at shutdown included.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from shared.errors import ConfigError
from shared.kube.access import NoClusterError, find_cluster
from shared.kube.client import KubeClient
from shared.runtime.arguments import parse_service_arguments
from shared.runtime.required import require_served
from shared.runtime.service import EXIT_CONFIG, ServiceContext, run_service
from shared.settings import env_name


class KubeServiceSettings(Protocol):
    @property
    def kubeconfig(self) -> str: ...

    @property
    def request_timeout_s(self) -> float: ...


SettingsT = TypeVar("SettingsT", bound=KubeServiceSettings)


def kube_service_main(
    component: str,
    *,
    module: str,
    doc: str | None,
    prefix: str,
    describe: Callable[[], str],
    load: Callable[[], SettingsT],
    start: Callable[[ServiceContext, KubeClient, SettingsT], None],
    argv: Sequence[str] | None = None,
    requires_dra: bool = False,
) -> int:
    """Answer the command line, or load the settings and run the service until it stops."""
    if parse_service_arguments(component, module=module, doc=doc or "", argv=argv).list_settings:
        print(describe())
        return 0
    try:
        settings = load()
    except ConfigError as exc:
        print(f"{component}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG
    variable = env_name(prefix, ("kubeconfig",))
    try:
        source = find_cluster(settings.kubeconfig, variable=variable)
    except NoClusterError as exc:
        print(f"{component}: no Kubernetes API: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def setup(ctx: ServiceContext) -> None:
        client = await KubeClient.connect_to(source, request_timeout_s=settings.request_timeout_s)
        client.count_requests(ctx.metrics)
        ctx.metrics_access.use(client)
        if requires_dra:
            # Unready while discovery has not answered: the service's own checks come later.
            served = False
            ctx.readiness.add("dra served", lambda: served)
            try:
                await require_served(client)
            except BaseException:
                await client.close()
                raise
            served = True
        start(ctx, client, settings)

    return run_service(component, setup)
