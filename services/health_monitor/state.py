"""The desired health of a node: a pure function of its faults, its clique and a little memory.

Two pure steps run at every evaluation (``now`` is a monotonic time in seconds):

- :func:`advance` moves the node's :class:`Episode` on. An episode starts when a warning or
  fatal fault appears and ends when the node has had no such fault for ``hold_down_s``. It
  remembers which faults were already announced (each fault is announced once per episode, so
  a flapping GPU does not repeat itself) and when each reaction was last needed. What the step
  asks to be announced comes back as data, :class:`AnnounceFaults` and
  :class:`AnnounceRecovery`, which the monitor hands to its announcer (``announcer``).
- :func:`desired_health` gives what the node should show: the reaction (taint effect), the
  ``cdo.dev/GpuHealthy`` condition and the clique labels. The circuit breaker (``breaker``)
  may cap the reaction below NoExecute; the condition then says so (``CircuitBreakerOpen``).

Hold-down: a reaction is kept until it has not been needed for ``hold_down_s``. A stronger
reaction applies at once; a weaker one (NoExecute to NoSchedule, or to no taint) only once the
stronger one has been unneeded for the whole hold-down. So a GPU that flaps faster than the
hold-down keeps one taint for the whole storm, and the node recovers once, after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from services.health_monitor.faults import Fault, Reaction, ordered, reaction_of
from services.health_monitor.rules import Severity
from shared.crds.names import (
    CLIQUE_LABEL,
    FAULT_TRACE_CONTEXT_ANNOTATION,
    MULTI_NODE_NVLINK_LABEL,
    NVLINK_DOMAIN_LABEL,
)
from shared.nvml import CliqueStatus, NodeClique
from shared.tracing import parse_traceparent

# How many faults the condition message lists before it says "and N more".
MESSAGE_FAULTS = 5


class Episode(msgspec.Struct, frozen=True, kw_only=True):
    """What the monitor remembers of the current fault episode (``open`` False: none)."""

    open: bool = False
    started_at: float = 0.0
    last_fault_at: float | None = None  # last evaluation that saw a warning or fatal fault
    last_no_schedule_at: float | None = None  # ... that needed at least NoSchedule
    last_no_execute_at: float | None = None  # ... that needed NoExecute
    announced: frozenset[str] = frozenset()  # fault keys announced in this episode
    signals: frozenset[str] = frozenset()  # signal families seen in this episode
    gpus: frozenset[int] = frozenset()  # GPUs with a fault in this episode


class AnnounceFaults(msgspec.Struct, frozen=True, kw_only=True):
    """NodeFault events for the faults new to the episode, worst first."""

    faults: tuple[Fault, ...]
    # The held reaction grew: the first fault (the one readers act on) skips the rate limit.
    urgent: bool = False
    # The episode's first faults: their span is the root of the fault's trace, and an earlier
    # episode's recovery not announced yet goes out before them.
    begins_episode: bool = False


class AnnounceRecovery(msgspec.Struct, frozen=True, kw_only=True):
    """NodeRecovered for an episode that just ended, sent once the Node shows no fault taint."""

    episode: Episode


Announcement = AnnounceFaults | AnnounceRecovery


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one :func:`advance`: the next episode and what to announce, in order."""

    episode: Episode
    announcements: tuple[Announcement, ...] = ()

    def _faults(self) -> AnnounceFaults | None:
        return next((a for a in self.announcements if isinstance(a, AnnounceFaults)), None)

    @property
    def announce(self) -> tuple[Fault, ...]:
        """The faults new to the episode, worst first."""
        found = self._faults()
        return found.faults if found is not None else ()

    @property
    def started(self) -> bool:
        """A new episode began."""
        found = self._faults()
        return found is not None and found.begins_episode

    @property
    def escalated(self) -> bool:
        """The held reaction grew with a new fault: its announcement must not wait."""
        found = self._faults()
        return found is not None and found.urgent

    @property
    def recovered(self) -> Episode | None:
        """The episode that just ended, if one did."""
        ended = (a for a in self.announcements if isinstance(a, AnnounceRecovery))
        return next((a.episode for a in ended), None)


def _recent(moment: float | None, *, now: float, hold_down_s: float) -> bool:
    return moment is not None and now - moment < hold_down_s


def held_reaction(episode: Episode, *, now: float, hold_down_s: float) -> Reaction:
    """The reaction the hold-down still keeps (not counting what the faults ask for now)."""
    if _recent(episode.last_no_execute_at, now=now, hold_down_s=hold_down_s):
        return Reaction.NO_EXECUTE
    if _recent(episode.last_no_schedule_at, now=now, hold_down_s=hold_down_s):
        return Reaction.NO_SCHEDULE
    return Reaction.NONE


def advance(episode: Episode, *, faults: Sequence[Fault], now: float, hold_down_s: float) -> Step:
    """The episode after an evaluation at ``now`` that saw ``faults``.

    ``faults`` should include those seen since the previous evaluation, even if they have
    cleared since, so that a fault shorter than one evaluation still counts.
    """
    if faults:
        started = not episode.open
        before = held_reaction(episode, now=now, hold_down_s=hold_down_s)
        if started:
            episode = Episode(open=True, started_at=now)
        reaction = reaction_of(faults)
        fresh = [fault for fault in ordered(faults) if fault.key not in episode.announced]
        no_schedule = reaction >= Reaction.NO_SCHEDULE
        no_execute = reaction >= Reaction.NO_EXECUTE
        episode = msgspec.structs.replace(
            episode,
            last_fault_at=now,
            last_no_schedule_at=now if no_schedule else episode.last_no_schedule_at,
            last_no_execute_at=now if no_execute else episode.last_no_execute_at,
            announced=episode.announced | {fault.key for fault in fresh},
            signals=episode.signals | {fault.signal for fault in faults},
            gpus=episode.gpus | {fault.gpu for fault in faults if fault.gpu is not None},
        )
        if not fresh:
            return Step(episode=episode)  # every fault was announced already this episode
        announce = AnnounceFaults(
            faults=tuple(fresh), urgent=reaction > before, begins_episode=started
        )
        return Step(episode=episode, announcements=(announce,))
    if episode.open and not _recent(episode.last_fault_at, now=now, hold_down_s=hold_down_s):
        return Step(episode=Episode(), announcements=(AnnounceRecovery(episode=episode),))
    return Step(episode=episode)


def resumed_episode(*, effect: str | None, now: float) -> Episode:
    """The episode to start from when the node already carries the fault taint (a restart).

    The taint is kept for a full hold-down from ``now``: the monitor cannot know how long the
    node has been healthy before it started.
    """
    if effect == "NoExecute":
        reaction = Reaction.NO_EXECUTE
    elif effect == "NoSchedule":
        reaction = Reaction.NO_SCHEDULE
    else:
        return Episode()
    return Episode(
        open=True,
        started_at=now,
        last_fault_at=now,
        last_no_schedule_at=now,
        last_no_execute_at=now if reaction is Reaction.NO_EXECUTE else None,
    )


def next_deadline(episode: Episode, *, now: float, hold_down_s: float) -> float | None:
    """The next time the episode changes by itself (a hold-down ends), if any."""
    if not episode.open:
        return None
    moments = (episode.last_no_execute_at, episode.last_no_schedule_at, episode.last_fault_at)
    later = [moment + hold_down_s for moment in moments if moment is not None]
    pending = [moment for moment in later if moment > now]
    return min(pending) if pending else now


# -- the desired state --------------------------------------------------------------------------


class ConditionState(msgspec.Struct, frozen=True, kw_only=True):
    """The ``cdo.dev/GpuHealthy`` condition without its timestamps."""

    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str


class NodeHealth(msgspec.Struct, frozen=True, kw_only=True):
    """What the node should show."""

    reaction: Reaction
    condition: ConditionState
    labels: Mapping[str, str | None]  # value None: remove; a label not named: leave as it is
    faults: tuple[Fault, ...] = ()  # active warning and fatal faults, worst first


# Condition reasons (CamelCase, as Kubernetes condition reasons are).
REASON_HEALTHY = "GpuHealthy"
REASON_WARNING = "GpuWarning"  # warnings that need nothing of the node
REASON_DEGRADED = "GpuDegraded"  # warnings that keep new work away (NoSchedule)
REASON_FAULT = "GpuFault"  # fatal: workloads must move (NoExecute)
REASON_HOLD_DOWN = "RecoveryHoldDown"  # faults cleared; the taint stays for the hold-down
REASON_NVML_UNAVAILABLE = "NvmlUnavailable"
REASON_BREAKER_OPEN = "CircuitBreakerOpen"  # fatal, but the breaker holds NoExecute back
# Faults confined to some GPUs (scope): the node serves its other GPUs, so it stays healthy.
REASON_GPU_CONFINED = "GpuDeviceFault"


def _listing(faults: Sequence[Fault]) -> str:
    shown = [fault.message for fault in faults[:MESSAGE_FAULTS]]
    if len(faults) > MESSAGE_FAULTS:
        shown.append(f"and {len(faults) - MESSAGE_FAULTS} more")
    return "; ".join(shown)


def clique_labels(clique: NodeClique | None) -> dict[str, str | None]:
    """The clique labels: set when every GPU registered in one clique, removed otherwise;
    ``cdo.dev/multi-node-nvlink=false`` only when no GPU of the node is on an NVLink fabric.

    ``clique`` None (NVML cannot be read) leaves the labels alone: not knowing the clique is
    not a reason to take the node out of it.
    """
    if clique is None:
        return {}
    if clique.status is CliqueStatus.READY and clique.clique and clique.cluster_uuid:
        return {
            CLIQUE_LABEL: clique.clique,
            NVLINK_DOMAIN_LABEL: str(clique.cluster_uuid),
            MULTI_NODE_NVLINK_LABEL: None,
        }
    absent = "false" if clique.status is CliqueStatus.NOT_SUPPORTED else None
    return {CLIQUE_LABEL: None, NVLINK_DOMAIN_LABEL: None, MULTI_NODE_NVLINK_LABEL: absent}


def _condition(
    faults: Sequence[Fault],
    *,
    raw: Reaction,
    held: Reaction,
    nvml_unavailable: str | None,
    hold_down_s: float,
    withheld: str | None,
) -> ConditionState:
    if nvml_unavailable is not None:
        return ConditionState(
            status="Unknown",
            reason=REASON_NVML_UNAVAILABLE,
            message=f"NVML cannot be read, GPU health is unknown: {nvml_unavailable}",
        )
    if withheld is not None and raw is Reaction.NO_EXECUTE and held < raw:
        return ConditionState(
            status="False",
            reason=REASON_BREAKER_OPEN,
            message=f"{_listing(faults)}; NoExecute withheld by the circuit breaker, "
            f"NoSchedule instead: {withheld}",
        )
    if held > raw:
        remaining = f"; still: {_listing(faults)}" if faults else ""
        return ConditionState(
            status="False",
            reason=REASON_HOLD_DOWN,
            message=f"faults cleared; the {held.effect} taint stays until the node has been "
            f"healthy for {hold_down_s:g}s{remaining}",
        )
    if raw is Reaction.NO_EXECUTE:
        return ConditionState(status="False", reason=REASON_FAULT, message=_listing(faults))
    if raw is Reaction.NO_SCHEDULE:
        return ConditionState(status="False", reason=REASON_DEGRADED, message=_listing(faults))
    confined = sorted(
        {f.gpu for f in faults if f.confined and f.gpu is not None and f.wanted > Reaction.NONE}
    )
    if confined:
        which = ", ".join(str(gpu) for gpu in confined)
        return ConditionState(
            status="True",
            reason=REASON_GPU_CONFINED,
            message=f"{_listing(faults)}; confined to GPU {which}: only the pods holding it "
            "are affected",
        )
    if faults:
        return ConditionState(status="True", reason=REASON_WARNING, message=_listing(faults))
    return ConditionState(
        status="True", reason=REASON_HEALTHY, message="no GPU, NVLink or fabric fault"
    )


def desired_health(
    *,
    faults: Sequence[Fault],
    clique: NodeClique | None,
    episode: Episode,
    now: float,
    hold_down_s: float,
    nvml_unavailable: str | None = None,
    cap: Reaction = Reaction.NO_EXECUTE,
    withheld: str | None = None,
) -> NodeHealth:
    """What the node should show, given its active faults and the episode after ``advance``.

    ``nvml_unavailable`` says why NVML cannot be read (its fault is among ``faults``): the
    condition is then Unknown and the clique labels are left alone. ``cap`` is the strongest
    taint the circuit breaker allows now; ``withheld`` (the breaker's cap in words) says it
    holds NoExecute back, which the condition then reports.
    """
    active = tuple(ordered(fault for fault in faults if fault.severity is not Severity.OK))
    raw = reaction_of(active)
    reaction = min(cap, max(raw, held_reaction(episode, now=now, hold_down_s=hold_down_s)))
    return NodeHealth(
        reaction=reaction,
        condition=_condition(
            active,
            raw=raw,
            held=reaction,
            nvml_unavailable=nvml_unavailable,
            hold_down_s=hold_down_s,
            withheld=withheld,
        ),
        labels=clique_labels(None if nvml_unavailable is not None else clique),
        faults=active,
    )


def resumed_trace(annotations: Mapping[str, str]) -> str | None:
    """The trace of an episode resumed after a restart: the fault context the Node carries."""
    value = annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION)
    return value if value and parse_traceparent(value) is not None else None
