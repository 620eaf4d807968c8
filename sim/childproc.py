"""Child processes that never outlive the simulator process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec (``preexec_fn``): Linux SIGKILLs it when its parent exits, even
    when the parent itself was SIGKILLed, so a killed cluster leaves no process behind."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with(parent: int) -> None:
    """In the child itself, first thing: the same, for a child started without ``preexec_fn``.

    A ``preexec_fn`` makes Python fork the whole parent, and a parent that runs gRPC (the
    simulated kubelets do) can abort in the forked child before it execs; started without one
    the child is spawned cleanly and asks for the signal itself. If the parent is gone already
    (it died before the child got here), the child exits at once."""
    die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
