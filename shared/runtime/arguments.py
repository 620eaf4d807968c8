"""The command line every cdo service takes: ``--help``, ``--version``, ``--settings``.

A service is configured by CDO_* variables only (a Deployment's environment), so its command
line has nothing else: an unknown argument ends the process with the usage and exit code 2
before anything starts, as argparse does, instead of being ignored.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from shared.version import version


@dataclass(frozen=True)
class ServiceArguments:
    list_settings: bool


def parse_service_arguments(
    component: str, *, module: str, doc: str, argv: Sequence[str] | None = None
) -> ServiceArguments:
    """The parsed command line; ``--help``, ``--version`` and bad arguments exit here."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=(doc or "").strip().splitlines()[0] if doc else component,
        epilog="Settings come from CDO_* environment variables; --settings lists them.",
    )
    parser.add_argument(
        "--settings",
        action="store_true",
        help="list the CDO_* variables this service reads, with defaults, and exit",
    )
    parser.add_argument("--version", action="version", version=f"cdo {component} {version()}")
    namespace = parser.parse_args(argv)
    return ServiceArguments(list_settings=bool(namespace.settings))
