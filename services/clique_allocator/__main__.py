"""The clique allocator process.

python -m services.clique_allocator              # run (settings from CDO_* variables)
python -m services.clique_allocator --settings   # list its CDO_CLIQUE_ALLOCATOR_* settings
python -m services.clique_allocator --version    # its version; --help: its command line
"""

from __future__ import annotations

from services.clique_allocator.controller import COMPONENT, CliqueAllocator
from services.clique_allocator.settings import ENV_PREFIX, CliqueAllocatorSettings, describe, load
from shared.kube.client import KubeClient
from shared.runtime import ServiceContext
from shared.runtime.entry import kube_service_main


def start(ctx: ServiceContext, client: KubeClient, settings: CliqueAllocatorSettings) -> None:
    CliqueAllocator(ctx, client=client, settings=settings).start()


def main() -> int:
    return kube_service_main(
        COMPONENT,
        module="services.clique_allocator",
        doc=__doc__,
        prefix=ENV_PREFIX,
        describe=describe,
        load=load,
        start=start,
        requires_dra=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
