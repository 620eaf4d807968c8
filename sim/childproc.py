"""Child processes that never outlive the simulator process that started them."""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec (``preexec_fn``): Linux SIGKILLs it when its parent exits, even
    when the parent itself was SIGKILLed, so a killed cluster leaves no process behind."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
