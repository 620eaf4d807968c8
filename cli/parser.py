"""The ``cdo`` argument parser: the connection options, and one subparser per command group.

Each group adds its own arguments (:mod:`cli.status`, :mod:`cli.events`, and
:mod:`sim.control.commands` for ``cdo sim``); this module only assembles them.
"""

from __future__ import annotations

import argparse

from cli import completion, events, explain, preflight, status, top, ui, wait
from cli.connection import connection_options
from shared.version import version
from sim.control import commands as sim_commands

EXIT_CODES = "exit codes: 0 ok, 1 failed, 2 usage, 3 cluster or NATS unreachable"


def build_parser(prog: str = "cdo") -> argparse.ArgumentParser:
    """The whole command line; ``prog`` is ``kubectl cdo`` when run as a kubectl plugin."""
    common = connection_options()
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Look at cdo's ComputeDomains and events, explain why a domain waits; "
        "run the simulated cluster.",
        parents=[common],
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"cdo {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    status.add_parser(commands, common=common, epilog=EXIT_CODES)
    explain.add_parser(commands, common=common, epilog=EXIT_CODES)
    top.add_parser(commands, common=common, epilog=EXIT_CODES)
    preflight.add_parser(commands, common=common, epilog=EXIT_CODES)
    events.add_parser(commands, common=common, epilog=EXIT_CODES)
    wait.add_parser(commands, common=common, epilog=EXIT_CODES)
    ui.add_parser(commands, common=common, epilog=EXIT_CODES)
    sim_commands.add_parser(commands, common=common, epilog=EXIT_CODES)
    completion.add_parser(commands, common=common, epilog=EXIT_CODES)
    return parser
