"""``cdo sim freeze|thaw <service>``: stop a leader-elected service dead and wake it again.

SIGSTOP stops a process where it is, without it noticing: it answers nothing (probes included),
renews no Lease, and every connection stays open. That is how a stalled leader looks (a long
garbage-collection pause, a starved node, a paused VM). While it is frozen a standby takes the
Lease over once it expires; on SIGCONT the service finds its time as leader gone, writes
nothing, and exits, and the control plane starts it again as a standby
(docs/controller-runtime.md, "Leader election").
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from shared.command_errors import CommandError, UsageError
from sim.control.processes import alive
from sim.control.state import read_controlplane

FREEZABLE = {"domain-controller": "-m services.domain_controller",
             "clique-allocator": "-m services.clique_allocator"}  # fmt: skip


def freeze(state_dir: Path, service: str, *, say: Callable[[str], None]) -> None:
    pid = _pid(state_dir, service)
    os.kill(pid, signal.SIGSTOP)
    say(f"{service} frozen (pid {pid}); cdo sim thaw {service} wakes it")


def thaw(state_dir: Path, service: str, *, say: Callable[[str], None]) -> None:
    pid = _pid(state_dir, service)
    os.kill(pid, signal.SIGCONT)
    say(f"{service} thawed (pid {pid})")


def frozen(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (state T in /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "T"


def _pid(state_dir: Path, service: str) -> int:
    marker = FREEZABLE.get(service)
    if marker is None:
        raise UsageError(f"freeze what? one of {', '.join(FREEZABLE)} (got {service!r})")
    info = read_controlplane(state_dir)
    if info is None or service not in info.services:
        raise CommandError(f"no control plane runs {service} in {state_dir}")
    pid = info.services[service].pid
    if not alive(pid, marker):
        raise CommandError(f"{service} (pid {pid}) is not running (the control plane restarts it)")
    return pid
