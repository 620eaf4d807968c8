"""``cdo``, the operators' command line: an application on top of cdo, not shared code.

``cdo status`` and ``cdo events`` read the Kubernetes API and NATS through cdo's shared clients
(``shared.kube``, ``shared.bus``), so they work the same against a real cluster. The ``cdo sim``
group is the simulator's own (:mod:`sim.control.commands`): this application adds it to its
parser and runs it, and the simulated cluster's state directory (:mod:`sim.control.state`) is
where it finds the cluster when nothing else says. Nothing in ``shared``, ``services`` or ``sim``
imports this package (import-linter contracts in pyproject.toml).

Modules: ``main`` (dispatch, exit codes), ``parser`` (the connection options and the command
groups), ``connection`` (where the cluster and NATS are), ``status/``, ``events``.
docs/cli.md is the manual.
"""

from cli.main import main
from cli.parser import build_parser

__all__ = ["build_parser", "main"]
