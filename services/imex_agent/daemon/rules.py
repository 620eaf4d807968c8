"""What the daemon controller decides, as pure functions of what it knows (no I/O).

:func:`decide` picks the next action for the node's daemon (the package docstring lists them);
the rest are the facts it compares: what a daemon serves (:class:`Serving`, the digests of its
files, its record), the hosts mapping it is given, and the waits between SIGUSR1s and restarts.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence

import msgspec

from services.imex_agent.binaries import ImexProcess
from services.imex_agent.imexconfig import ImexPaths, render_config
from services.imex_agent.preflight import DaemonRecord
from services.imex_agent.roster import Roster, render_nodes_config, slot_hostname
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import Phase


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """What the daemon should serve: the node's clique and its roster (None while unknown)."""

    clique: str | None
    roster: Roster | None = None
    detail: str = ""


class Serving(msgspec.Struct, frozen=True, kw_only=True):
    """What the running daemon was started with, as far as :func:`decide` needs it."""

    clique: str
    slot: int
    config_digest: str
    """:func:`digest` of its ``config.cfg``."""
    map_digest: str
    """:func:`digest` of its ``nodes_config.cfg``."""


class Action(enum.StrEnum):
    IDLE = "idle"
    """Nothing runs and nothing should."""
    START = "start"
    """Nothing runs; start a daemon (once a restart backoff has passed)."""
    KEEP = "keep"
    """The running daemon serves the target: apply the hosts mapping (SIGUSR1 when it changed)."""
    WAIT = "wait"
    """The daemon serves the node's clique, whose roster is not known yet (an agent that has just
    adopted it): leave it as it is."""
    HOLD = "hold"
    """The node left its clique: keep the daemon until the leave grace ends."""
    STOP = "stop"
    """Stop the daemon and run none."""
    RESTART = "restart"
    """Stop the daemon; the next step starts one with the new files."""


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    action: Action
    phase: Phase = Phase.RUNNING
    """What to report while (or after) the action is taken."""
    reason: str = ""
    """Why a daemon stops (the ``reason`` label of the next start)."""
    wait_s: float | None = None
    """HOLD: seconds of the leave grace still to run."""


def decide(
    *,
    node: str,
    target: Target,
    serving: Serving | None,
    config: str,
    nodes_config: str | None,
    left_since: float | None,
    now: float,
    grace_s: float,
) -> Decision:
    """What to do with the node's daemon now (pure; see the package docstring).

    ``config`` and ``nodes_config`` are the files the target calls for (``nodes_config`` None
    without a clique); ``left_since`` is when the node was first seen out of its clique while its
    daemon ran (None: it was a member at the last step).
    """
    roster = target.roster
    member = roster.member(node) if roster is not None else None
    out = Phase.NO_CLIQUE if target.clique is None else Phase.NOT_IN_ROSTER
    if serving is None:
        if member is None:
            return Decision(action=Action.IDLE, phase=out)
        return Decision(action=Action.START)
    if roster is None and target.clique == serving.clique:
        return Decision(action=Action.WAIT)
    if member is not None:
        wanted_map = digest(nodes_config) if nodes_config is not None else ""
        if member.slot != serving.slot or wanted_map != serving.map_digest:
            return Decision(action=Action.RESTART, reason="node_map")
        if digest(config) != serving.config_digest:
            return Decision(action=Action.RESTART, reason="config")
        return Decision(action=Action.KEEP)
    if target.clique is not None and target.clique != serving.clique:
        return Decision(action=Action.STOP, phase=out, reason="node_map")
    rival = roster.at(serving.slot) if roster is not None else None
    if rival is not None:
        return Decision(action=Action.STOP, phase=out, reason="roster")
    remaining = (now if left_since is None else left_since) + grace_s - now
    if remaining > 0:
        return Decision(action=Action.HOLD, wait_s=remaining)
    return Decision(action=Action.STOP, phase=out, reason="roster")


def reload_wait(*, last_reload: float, interval_s: float, now: float) -> float:
    """Seconds until the next SIGUSR1 may be sent (0: now)."""
    return max(0.0, last_reload + interval_s - now)


def served_hosts(roster: Roster, *, empty: str, own_slot: int, own_address: str) -> dict[str, str]:
    """The hosts mapping of a daemon that serves ``roster`` from ``own_slot`` (pure).

    Every slot's name: its member's address or the sentinel ``empty``; this node's own slot is
    always its own address, even while the node is out of the roster (its daemon is held).
    """
    hosts = roster.hosts(empty=empty)
    hosts[slot_hostname(roster.clique, own_slot)] = own_address
    return hosts


class Running(msgspec.Struct, frozen=True, kw_only=True):
    """What the running daemon was started with (and the hosts mapping it was last told)."""

    serving: Serving
    roster: Roster
    hosts: dict[str, str]
    started_at: float


def digest(text: str) -> str:
    """The digest of a daemon file the events and the daemon record carry (pure)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def map_digest(nodes_config: str) -> str:
    """The digest of a node map (``config_digest`` in the events; equal across a clique)."""
    return digest(nodes_config)


def serving_for(clique: str, slot: int, *, config: str, nodes_config: str) -> Serving:
    """What a daemon started from ``slot`` of ``clique`` with these files serves (pure)."""
    return Serving(
        clique=clique,
        slot=slot,
        config_digest=digest(config),
        map_digest=map_digest(nodes_config),
    )


def wanted_files(
    settings: ImexSettings, *, address: str, paths: ImexPaths, clique: str | None
) -> tuple[str, str | None]:
    """The ``config.cfg`` and ``nodes_config.cfg`` the node's daemon should have (pure; no node
    map without a clique)."""
    config = render_config(settings=settings, address=address, paths=paths)
    if clique is None:
        return config, None
    return config, render_nodes_config(clique, slots=settings.max_nodes_per_domain)


def record_of(process: ImexProcess, serving: Serving) -> DaemonRecord:
    """The daemon record of ``process`` serving ``serving`` (pure)."""
    return DaemonRecord(
        process=process.identity,
        clique=serving.clique,
        slot=serving.slot,
        config_digest=serving.config_digest,
        map_digest=serving.map_digest,
    )


def serving_of(record: DaemonRecord) -> Serving:
    """What an adopted daemon serves, as its record says (pure)."""
    return Serving(
        clique=record.clique,
        slot=record.slot,
        config_digest=record.config_digest,
        map_digest=record.map_digest,
    )


def foreign_detail(address: str, answering: list[int]) -> str:
    """Why no daemon is started while another one holds the node's ports (pure)."""
    return (
        f"ports {', '.join(map(str, answering))} on {address} already answer; "
        "stop the host's nvidia-imex (e.g. its systemd unit) to let the agent run IMEX"
    )


def programs_detail(missing: Sequence[str]) -> str:
    """Why no daemon is started while the IMEX programs cannot be found (pure)."""
    return (
        f"{', '.join(missing)} not found in the agent's container: the NVIDIA container runtime "
        "puts the node's IMEX programs there (runtimeClassName nvidia, NVIDIA Container Toolkit "
        "1.17.5 or newer in cdi mode); install the driver's nvidia-imex package on the node"
    )


def hold_detail(*, clique: str, why: str, grace_s: float) -> str:
    """The state's detail while a node that left its clique keeps its daemon (pure)."""
    return (
        f"left clique {clique}"
        + (f" ({why})" if why else "")
        + f"; the daemon stops {grace_s:g} s after that unless the "
        "node rejoins"
    )
