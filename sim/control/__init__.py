"""Controlling the simulated cluster from outside it: ``cdo sim`` and its library.

The simulator's programs (``python -m sim up``, ``sim.controlplane``, ``sim.nodehost``) run as
background processes and write what they serve into the state directory; everything here finds
them there and talks to their HTTP control APIs. Tests, benchmarks and the demo use the same
functions as the command line.

Modules: ``state`` (the state directory's files), ``processes`` (starting, checking, stopping
background programs), ``http`` (JSON requests to the control APIs), ``up`` and ``down``,
``nodes`` (power, faults and node clocks), ``imex`` (IMEX daemon counts and restarts),
``restart`` (restarts of the control plane, node host and API server; NATS stopped and started),
``freeze`` (SIGSTOP and SIGCONT of a leader-elected service), ``commands`` (the ``cdo sim``
arguments), ``api`` (the control API the running cluster serves).

    from sim import control
    control.up(control.UpOptions(...), say=print)
"""

from sim.control.down import down
from sim.control.freeze import freeze, frozen, thaw
from sim.control.http import request
from sim.control.imex import ImexCount, imex_counts, imex_restarts
from sim.control.nodes import clock, fault, fault_body, power
from sim.control.restart import nats_start, nats_stop, restart
from sim.control.up import UpOptions, up

__all__ = [
    "ImexCount",
    "UpOptions",
    "clock",
    "down",
    "fault",
    "fault_body",
    "freeze",
    "frozen",
    "imex_counts",
    "imex_restarts",
    "nats_start",
    "nats_stop",
    "power",
    "request",
    "restart",
    "thaw",
    "up",
]
