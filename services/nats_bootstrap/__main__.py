"""``python -m services.nats_bootstrap``: create or update the event stream and the snapshot
bucket, then exit (0 done, 1 NATS unreachable or refusing, 2 a bad setting)."""

from __future__ import annotations

import asyncio
import sys

from services.nats_bootstrap.bootstrap import BootstrapFailedError, bootstrap
from shared.bus.settings import NatsSettings, nats_url_problem
from shared.errors import ConfigError
from shared.runtime.arguments import parse_service_arguments
from shared.settings import describe_table, load_settings

COMPONENT = "nats-bootstrap"
PREFIX = "CDO_NATS_"
EXIT_FAILED = 1
EXIT_CONFIG = 2


def main() -> int:
    arguments = parse_service_arguments(
        COMPONENT, module="services.nats_bootstrap", doc=__doc__ or ""
    )
    if arguments.list_settings:
        print(describe_table(NatsSettings, prefix=PREFIX))
        return 0
    try:
        settings = load_settings(NatsSettings, prefix=PREFIX)
    except ConfigError as exc:
        print(f"{COMPONENT}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG
    problem = nats_url_problem(settings.url)
    if problem is not None:
        print(f"{COMPONENT}: invalid setting {PREFIX}URL: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        done = asyncio.run(bootstrap(settings))
    except ConfigError as exc:  # an unreadable token file, named by its variable
        print(f"{COMPONENT}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except BootstrapFailedError as exc:
        print(f"{COMPONENT}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(
        f"{COMPONENT}: stream {settings.stream} {done.stream}, "
        f"bucket {settings.snapshot_bucket} {done.bucket}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
