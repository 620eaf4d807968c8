"""``python -m services <service> [args]``: the one image's entry point.

The image holds every cdo service; its entry point is this module and the first argument picks
the service, which then gets the rest of the command line as its own::

    python -m services domain-controller --version
    python -m services imex-agent

Each service is still its own module (``python -m services.domain_controller`` is the same
program); this only dispatches by name, so no service imports another.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence

SERVICES = (
    "domain-controller",
    "clique-allocator",
    "imex-agent",
    "health-monitor",
    "nats-auth",
    "nats-bootstrap",
)
EXIT_USAGE = 2


def module_of(service: str) -> str:
    return "services." + service.replace("-", "_")


def usage() -> str:
    return (
        "usage: python -m services {" + ",".join(SERVICES) + "} [--help | --version | --settings]"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(usage(), file=sys.stderr)
        print("python -m services: error: name the service to run", file=sys.stderr)
        return EXIT_USAGE
    if args[0] in ("-h", "--help"):
        print(usage())
        print("\nThe first argument picks the service; the rest is that service's command line.")
        return 0
    service, rest = args[0], args[1:]
    if service not in SERVICES:
        print(usage(), file=sys.stderr)
        print(f"python -m services: error: unknown service {service!r}", file=sys.stderr)
        return EXIT_USAGE
    module = module_of(service)
    sys.argv = [f"python -m {module}", *rest]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
