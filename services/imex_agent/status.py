"""What the agent reports about its node's IMEX: the event and the node condition (pure).

The status contract:

- NATS: ``NodeImexState`` on ``cdo.v1.node.<node>.imex`` (and the KV snapshot), published
  whenever anything but the time changes: the daemon state (``NOT_RUNNING`` while no daemon of
  ours runs, else what ``nvidia-imex-ctl`` reports), the domain state (UP, DEGRADED, DOWN;
  UNKNOWN while the daemon is not READY), this node's view of each peer's connection, the digest
  of the node map and the restart count.
- Kubernetes: condition ``cdo.dev/ImexReady`` on the node, written only by this agent: ``True``
  exactly while our daemon answers READY; ``False`` with a reason otherwise (NoClique,
  NotInRoster, ForeignImexDaemon, NotRunning, DaemonNotReady). The domain controller reads it.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime

import msgspec

from services.imex_agent import names
from services.imex_agent.report import CONNECTED, READY, DomainReport
from services.imex_agent.roster import Roster
from shared.crds.names import IMEX_READY_CONDITION
from shared.events import ImexPeer, NodeImexState

NOT_RUNNING = "NOT_RUNNING"
UNKNOWN = "UNKNOWN"


class Phase(enum.StrEnum):
    """Where the agent is with its node's daemon."""

    NO_CLIQUE = "NoClique"
    NOT_IN_ROSTER = "NotInRoster"
    FOREIGN = "Foreign"
    WAITING = "Waiting"  # between a daemon's exit and its restart
    RUNNING = "Running"


class ControlState(msgspec.Struct, frozen=True, kw_only=True):
    """What the daemon's controller knows, for the reporter."""

    phase: Phase
    clique: str = ""
    detail: str = ""
    restarts: int = 0
    config_digest: str = ""


class Observation(msgspec.Struct, frozen=True, kw_only=True):
    """One look at the node's IMEX: the controller's state and what the ctl printed."""

    control: ControlState
    daemon_state: str = NOT_RUNNING
    domain: DomainReport | None = None


class ConditionValue(msgspec.Struct, frozen=True, kw_only=True):
    status: str
    reason: str
    message: str


def peers_of(domain: DomainReport | None, *, address: str, roster: Roster) -> tuple[ImexPeer, ...]:
    """This node's view of every other node of the map, named by the roster where it can be."""
    if domain is None:
        return ()
    own = domain.row(address)
    if own is None:
        return ()
    peers = []
    for link in own.links:
        if link.index == own.index:
            continue
        member = roster.by_address(link.host)
        peers.append(
            ImexPeer(
                node=member.node if member is not None else link.host or f"#{link.index}",
                address=link.host,
                state=link.state,
            )
        )
    return tuple(peers)


def node_event(
    observation: Observation, *, node: str, address: str, roster: Roster
) -> NodeImexState:
    control = observation.control
    ready = observation.daemon_state == READY
    domain = observation.domain if ready else None
    return NodeImexState(
        node=node,
        clique=control.clique,
        daemon_state=observation.daemon_state,
        domain_state=domain.state if domain is not None else UNKNOWN,
        peers=peers_of(domain, address=address, roster=roster),
        config_digest=control.config_digest,
        restarts=control.restarts,
    )


def same_report(a: NodeImexState | None, b: NodeImexState) -> bool:
    """Whether two events say the same thing (ids and times aside)."""
    if a is None:
        return False
    return msgspec.structs.replace(a, id=b.id, time=b.time, source=b.source) == b


def condition_value(observation: Observation, event: NodeImexState) -> ConditionValue:
    control = observation.control
    detail = f": {control.detail}" if control.detail else ""
    if control.phase is Phase.NO_CLIQUE:
        return ConditionValue(
            status="False", reason=names.REASON_NO_CLIQUE, message=f"no NVLink clique{detail}"
        )
    if control.phase is Phase.NOT_IN_ROSTER:
        return ConditionValue(
            status="False",
            reason=names.REASON_NOT_IN_ROSTER,
            message=f"not a member of clique {control.clique}{detail}",
        )
    if control.phase is Phase.FOREIGN:
        return ConditionValue(
            status="False",
            reason=names.REASON_FOREIGN_DAEMON,
            message=f"another IMEX daemon runs on this node; not starting one{detail}",
        )
    if control.phase is Phase.WAITING:
        return ConditionValue(
            status="False", reason=names.REASON_NOT_RUNNING, message=f"nvidia-imex{detail}"
        )
    if event.daemon_state != READY:
        return ConditionValue(
            status="False",
            reason=names.REASON_NOT_READY,
            message=f"nvidia-imex-ctl -q: {event.daemon_state}",
        )
    connected = sum(1 for peer in event.peers if peer.state == CONNECTED)
    return ConditionValue(
        status="True",
        reason=names.REASON_READY,
        message=(
            f"nvidia-imex-ctl -q: READY; domain {event.domain_state}; "
            f"{connected}/{len(event.peers)} peers connected"
        ),
    )


def condition_patch(
    value: ConditionValue, *, transition: datetime, now: datetime
) -> dict[str, object]:
    """A strategic merge patch of ``nodes/<node>/status`` setting the condition."""
    return {
        "status": {
            "conditions": [
                {
                    "type": IMEX_READY_CONDITION,
                    "status": value.status,
                    "reason": value.reason,
                    "message": value.message,
                    "lastHeartbeatTime": _rfc3339(now),
                    "lastTransitionTime": _rfc3339(transition),
                }
            ]
        }
    }


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
