"""The ``main()`` every Kubernetes-facing service shares: its command line, settings, API client.

    def main() -> int:
        return kube_service_main(
            COMPONENT, module="services.<name>", doc=__doc__, prefix=ENV_PREFIX,
            describe=describe, load=load, start=start,
        )

``--help``, ``--version`` and ``--settings`` print and exit; an unknown argument, an invalid
setting or no API server to reach ends the process before it starts, with one line that names
the variable to set (exit 2).

``start(ctx, client, settings)`` wires the service into the runtime, closing of the API client
at shutdown included.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from shared.errors import ConfigError
from shared.kube.access import kube_access_problem
from shared.kube.client import KubeClient
from shared.runtime.arguments import parse_service_arguments
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
    if (problem := kube_access_problem(settings.kubeconfig, variable=variable)) is not None:
        print(f"{component}: no Kubernetes API: {problem}", file=sys.stderr)
        return EXIT_CONFIG

    async def setup(ctx: ServiceContext) -> None:
        client = await KubeClient.connect(
            kubeconfig=settings.kubeconfig or None, request_timeout_s=settings.request_timeout_s
        )
        start(ctx, client, settings)

    return run_service(component, setup)
