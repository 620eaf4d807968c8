"""The ``main()`` every Kubernetes-facing service shares: ``--settings``, settings, API client.

    def main() -> int:
        return kube_service_main(COMPONENT, describe=describe, load=load, start=start)

``start(ctx, client, settings)`` wires the service into the runtime, closing of the API client
at shutdown included.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.runtime.service import EXIT_CONFIG, ServiceContext, run_service


class KubeServiceSettings(Protocol):
    @property
    def kubeconfig(self) -> str: ...

    @property
    def request_timeout_s(self) -> float: ...


SettingsT = TypeVar("SettingsT", bound=KubeServiceSettings)


def kube_service_main(
    component: str,
    *,
    describe: Callable[[], str],
    load: Callable[[], SettingsT],
    start: Callable[[ServiceContext, KubeClient, SettingsT], None],
    argv: Sequence[str] | None = None,
) -> int:
    """Print the settings (``--settings``), or load them and run the service until it stops."""
    if "--settings" in (sys.argv[1:] if argv is None else argv):
        print(describe())
        return 0
    try:
        settings = load()
    except ConfigError as exc:
        print(f"{component}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def setup(ctx: ServiceContext) -> None:
        client = await KubeClient.connect(
            kubeconfig=settings.kubeconfig or None, request_timeout_s=settings.request_timeout_s
        )
        start(ctx, client, settings)

    return run_service(component, setup)
