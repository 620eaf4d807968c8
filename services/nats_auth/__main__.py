"""The NATS authenticator process (a sidecar of each NATS server pod).

python -m services.nats_auth              # run (settings from CDO_* variables)
python -m services.nats_auth --settings   # list its CDO_NATS_AUTH_* settings
"""

from __future__ import annotations

from services.nats_auth.service import COMPONENT, load, start
from services.nats_auth.settings import describe
from shared.runtime.entry import kube_service_main


def main() -> int:
    return kube_service_main(COMPONENT, describe=describe, load=load, start=start)


if __name__ == "__main__":
    raise SystemExit(main())
