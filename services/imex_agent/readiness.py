"""Whether this node's IMEX daemon can serve a claim now (pure), and the signal prepare waits on.

No container gets an IMEX channel while the node's own daemon is not READY: NodePrepareResources
asks :func:`imex_refusal` about the clique of the claim's slice and, while it refuses, waits for
the next change of :class:`ReadinessSource` until ``CDO_IMEX_AGENT_DRA_READY_WAIT_S`` has passed
(the driver's thin shell). Then it fails the claim with :class:`ImexNotReadyError`, whose message
(:func:`not_ready_message`) names the node, the wait and the reason; the kubelet retries it.

The facts come from what the agent already knows (:func:`readiness_of`): the daemon controller's
phase (no clique, not in the roster, a foreign daemon, waiting to restart, running; with its
detail) and what ``nvidia-imex-ctl`` last said, the status reporter's last NodeImexState. A
report about an earlier daemon (its ``restarts`` or clique behind the controller's) does not
count: a daemon that was just started or restarted is READY only once the ctl has said so.

IMEX is ready for a claim when the phase is Running, the ctl says READY, and the daemon serves the
clique of the claim's slice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import msgspec

from services.imex_agent.report import READY
from services.imex_agent.status import NOT_RUNNING, UNKNOWN, ControlState, Phase
from shared.errors import CdoError
from shared.events import NodeImexState


class ImexNotReadyError(CdoError):
    """The node's IMEX daemon did not become READY in time; retriable, the message says why."""


class ImexReadiness(msgspec.Struct, frozen=True, kw_only=True):
    """The node's IMEX as prepare sees it: the controller's phase and the ctl's last word."""

    phase: Phase
    clique: str = ""
    """The clique the controller serves (the daemon's, while Running)."""
    daemon_state: str = NOT_RUNNING
    """What ``nvidia-imex-ctl`` says about the running daemon (UNKNOWN: not asked about it yet)."""
    detail: str = ""

    @property
    def ready(self) -> bool:
        return self.phase is Phase.RUNNING and self.daemon_state == READY


def readiness_of(control: ControlState, event: NodeImexState | None) -> ImexReadiness:
    """The readiness from the controller's state and the reporter's last event (see above)."""
    if control.phase is not Phase.RUNNING:
        return ImexReadiness(phase=control.phase, clique=control.clique, detail=control.detail)
    if event is None or (event.restarts, event.clique) != (control.restarts, control.clique):
        return ImexReadiness(
            phase=Phase.RUNNING,
            clique=control.clique,
            daemon_state=UNKNOWN,
            detail="nvidia-imex-ctl has not reported on the daemon since it started",
        )
    return ImexReadiness(
        phase=Phase.RUNNING,
        clique=control.clique,
        daemon_state=event.daemon_state,
        detail=control.detail,
    )


def _phase(readiness: ImexReadiness) -> str:
    detail = f": {readiness.detail}" if readiness.detail else ""
    return f"(phase {readiness.phase.value}{detail})"


def imex_refusal(readiness: ImexReadiness, *, clique: str | None) -> str | None:
    """None when IMEX can serve a claim whose slice is in ``clique`` (None: any); else why not."""
    phase = readiness.phase
    if phase is Phase.NO_CLIQUE:
        return f"the node has no NVLink clique {_phase(readiness)}"
    if phase is Phase.NOT_IN_ROSTER:
        return f"the node is not a member of clique {readiness.clique} {_phase(readiness)}"
    if phase is Phase.FOREIGN:
        return f"another IMEX daemon holds this node's IMEX ports {_phase(readiness)}"
    if phase is Phase.PROGRAMS_MISSING:
        return f"the IMEX programs are missing on this node {_phase(readiness)}"
    if phase is Phase.WAITING:
        return f"nvidia-imex is not running {_phase(readiness)}"
    # Running (or a phase this module does not name, whose daemon_state is never READY):
    if not readiness.ready:
        return f"nvidia-imex-ctl reports {readiness.daemon_state}, not READY {_phase(readiness)}"
    if clique is not None and readiness.clique != clique:
        return (
            f"nvidia-imex serves clique {readiness.clique!r}, but the claim's slice is in clique "
            f"{clique!r}"
        )
    return None


def not_ready_message(*, node: str, reason: str, waited_s: float) -> str:
    """The claim's error: what the kubelet shows on the pod until a retry succeeds."""
    return (
        f"IMEX is not ready on node {node} (waited {waited_s:.1f} s): {reason}; retriable: the "
        "claim gets its channel once the node's IMEX daemon is READY"
    )


class ReadinessSource(Protocol):
    """What the DRA driver reads: the readiness now, and an awaitable for its next change."""

    def readiness(self) -> ImexReadiness: ...

    async def changed(self) -> None:
        """Return at the next change (the readiness may be the same again)."""
        ...


class ReadinessSignal:
    """A :class:`ReadinessSource` over a probe; whoever changes what it reads calls notify()."""

    def __init__(self, probe: Callable[[], ImexReadiness]) -> None:
        self._probe = probe
        self._changed = asyncio.Event()

    def readiness(self) -> ImexReadiness:
        return self._probe()

    def notify(self) -> None:
        """Wake every waiter of :meth:`changed`; later callers wait for the next notify."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        await self._changed.wait()
