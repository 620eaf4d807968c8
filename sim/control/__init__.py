"""Controlling the simulated cluster from outside it: ``cdo sim`` and its library.

The simulator's programs (``python -m sim up``, ``sim.controlplane``, ``sim.nodehost``) run as
background processes and write what they serve into the state directory; everything here finds
them there and talks to their HTTP control APIs. Tests, benchmarks and the demo use the same
functions as the command line.

Modules: ``state`` (the state directory's files), ``processes`` (starting, checking, stopping
background programs), ``http`` (JSON requests to the control APIs), ``up`` and ``down``,
``nodes`` (power and faults), ``imex`` (IMEX daemon counts and restarts), ``commands`` (the
``cdo sim`` arguments), ``api`` (the control API the running cluster serves).

    from sim import control
    control.up(control.UpOptions(...), say=print)
"""

from sim.control.down import down
from sim.control.http import request
from sim.control.imex import ImexCount, imex_counts, imex_restarts
from sim.control.nodes import fault, fault_body, power
from sim.control.up import UpOptions, up

__all__ = [
    "ImexCount",
    "UpOptions",
    "down",
    "fault",
    "fault_body",
    "imex_counts",
    "imex_restarts",
    "power",
    "request",
    "up",
]
