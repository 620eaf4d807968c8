"""What can go wrong in a command a person runs, and the exit code each failure means.

The ``cdo`` command line (``cli/``) and the simulator's control commands (``sim/control/``)
raise these; ``cdo`` prints the message and exits with the code.

CommandError             exit 1: the command failed (a refused request, a process that
│                                would not start, a node that does not exist)
├── UsageError           exit 2: the command line itself is wrong
└── UnreachableError     exit 3: the cluster (Kubernetes API, simulated cluster) or NATS
                                 cannot be reached, or nothing says where they are
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class CommandError(Exception):
    """A command failed; the message is for the person at the terminal."""

    exit_code = EXIT_FAILURE


class UsageError(CommandError):
    exit_code = EXIT_USAGE


class UnreachableError(CommandError):
    exit_code = EXIT_UNREACHABLE
