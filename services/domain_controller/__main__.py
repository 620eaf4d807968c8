"""The domain controller process.

python -m services.domain_controller              # run (settings from CDO_* variables)
python -m services.domain_controller --settings   # list its CDO_DOMAIN_CONTROLLER_* settings
"""

from __future__ import annotations

import sys

from services.domain_controller.controller import COMPONENT, DomainController
from services.domain_controller.settings import describe, load
from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.runtime import ServiceContext, run_service
from shared.runtime.service import EXIT_CONFIG


def main() -> int:
    if "--settings" in sys.argv[1:]:
        print(describe())
        return 0
    try:
        settings = load()
    except ConfigError as exc:
        print(f"{COMPONENT}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def setup(ctx: ServiceContext) -> None:
        client = await KubeClient.connect(
            kubeconfig=settings.kubeconfig or None, request_timeout_s=settings.request_timeout_s
        )
        DomainController(ctx, client=client, settings=settings).start()

    return run_service(COMPONENT, setup)


if __name__ == "__main__":
    raise SystemExit(main())
