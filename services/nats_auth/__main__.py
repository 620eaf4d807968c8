"""The NATS authenticator process (the cdo-nats-auth Deployment of the nats-auth-callout component).

python -m services.nats_auth              # run (settings from CDO_* variables)
python -m services.nats_auth --settings   # list its CDO_NATS_AUTH_* settings
python -m services.nats_auth --version    # its version; --help: its command line
"""

from __future__ import annotations

from services.nats_auth.service import COMPONENT, load, start
from services.nats_auth.settings import ENV_PREFIX, describe
from shared.runtime.entry import kube_service_main


def main() -> int:
    return kube_service_main(
        COMPONENT,
        module="services.nats_auth",
        doc=__doc__,
        prefix=ENV_PREFIX,
        describe=describe,
        load=load,
        start=start,
    )


if __name__ == "__main__":
    raise SystemExit(main())
