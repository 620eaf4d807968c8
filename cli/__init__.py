"""``cdo``, the operators' command line: an application on top of cdo, not shared code.

``cdo status`` and ``cdo events`` read the Kubernetes API and NATS through cdo's shared clients
(``shared.kube``, ``shared.bus``), so they work the same against a real cluster. The ``cdo sim``
group is the simulator's own (:mod:`sim.control.commands`): this application adds it to its
parser and runs it, and the simulated cluster's state directory (:mod:`sim.control.state`) is
where it finds the cluster when nothing else says. Nothing in ``shared``, ``services`` or ``sim``
imports this package (import-linter contracts in pyproject.toml).

Modules: ``main`` (dispatch, exit codes), ``parser`` (the command groups), ``connection``
(where the cluster and NATS are; the connection options), ``output`` and ``jsonpath`` (``-o``),
``watch`` (``-w``), ``status/``, ``explain/``, ``top``, ``preflight/``, ``events``, ``wait``,
``ui/`` (``cdo ui``, which also runs alone as ``python -m cli.ui``).
docs/cli.md is the manual.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> Any:
    # Loaded when asked for: ``python -m cli.ui`` (the image's page server) must not load the
    # command line, which needs the simulator for ``cdo sim``.
    # Importing the submodule binds its name here to the module; the function replaces it.
    if name == "main":
        from cli.main import main

        globals()["main"] = main
        return main
    if name == "build_parser":
        from cli.parser import build_parser

        globals()["build_parser"] = build_parser
        return build_parser
    raise AttributeError(f"module 'cli' has no attribute {name!r}")
