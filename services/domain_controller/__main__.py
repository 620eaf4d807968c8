"""The domain controller process.

python -m services.domain_controller              # run (settings from CDO_* variables)
python -m services.domain_controller --settings   # list its CDO_DOMAIN_CONTROLLER_* settings
python -m services.domain_controller --version    # its version; --help: its command line
"""

from __future__ import annotations

from services.domain_controller.controller import COMPONENT, DomainController
from services.domain_controller.settings import ENV_PREFIX, DomainControllerSettings, describe, load
from shared.kube.client import KubeClient
from shared.runtime import ServiceContext
from shared.runtime.entry import kube_service_main


def start(ctx: ServiceContext, client: KubeClient, settings: DomainControllerSettings) -> None:
    DomainController(ctx, client=client, settings=settings).start()


def main() -> int:
    return kube_service_main(
        COMPONENT,
        module="services.domain_controller",
        doc=__doc__,
        prefix=ENV_PREFIX,
        describe=describe,
        load=load,
        start=start,
        requires_dra=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
