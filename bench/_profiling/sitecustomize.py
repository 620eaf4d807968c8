"""cProfile for chosen programs of a simulated system, for ``python -m bench.scale --profile``.

On this directory's path (``PYTHONPATH``), Python imports this module at the start of every
process the system starts. A process run as ``python -m <module>`` with ``<module>`` in
``CDO_PROFILE_MODULES`` (comma separated) profiles its main thread (the event loop: asyncio
services run there) from then on, and writes ``<CDO_PROFILE_DIR>/<module>-<pid>.pstats``
when it exits: at a normal exit, or on SIGTERM when the program leaves that signal to the
default action (the dump is written, then the signal ends the process as it would have).
Every other process runs as without it.
"""

from __future__ import annotations

import atexit
import cProfile
import os
import signal
import sys
from types import FrameType


def _module() -> str:
    argv = sys.orig_argv
    return argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""


def _start(directory: str, module: str) -> None:
    profiler = cProfile.Profile()
    dumped = False

    def dump() -> None:
        nonlocal dumped
        if not dumped:
            dumped = True
            profiler.disable()
            profiler.dump_stats(os.path.join(directory, f"{module}-{os.getpid()}.pstats"))

    def on_term(signum: int, _frame: FrameType | None) -> None:
        dump()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    atexit.register(dump)
    signal.signal(signal.SIGTERM, on_term)
    profiler.enable()


_directory = os.environ.get("CDO_PROFILE_DIR", "")
_chosen = {name for name in os.environ.get("CDO_PROFILE_MODULES", "").split(",") if name}
if _directory and _module() in _chosen:
    _start(_directory, _module())
