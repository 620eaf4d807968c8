"""The ``cdo`` command line for operators: ``status``, ``events`` and ``sim``.

It reads the Kubernetes API and NATS through cdo's shared clients, and drives the simulated
cluster only as programs (``python -m sim``, ``python -m sim.nodehost``) and through their
HTTP control APIs, so it depends on nothing outside ``shared``.

Modules: ``main`` (arguments, dispatch, exit codes), ``connection`` (where the cluster and NATS
are), ``state`` (the simulated cluster's state directory), ``status``, ``events``, ``simctl``
(``cdo sim``), ``errors`` (the failures and their exit codes). docs/cli.md is the manual.
"""

from shared.cli.errors import CliError, UnreachableError, UsageError
from shared.cli.main import build_parser, main

__all__ = ["CliError", "UnreachableError", "UsageError", "build_parser", "main"]
