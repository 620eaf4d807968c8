"""What the agent reports about its node's IMEX: the event and the node condition (pure).

The status contract:

- NATS: ``NodeImexState`` on ``cdo.v1.node.<node>.imex`` (and the KV snapshot), published
  whenever anything but the time changes: the daemon state (``NOT_RUNNING`` while no daemon of
  ours runs, else what ``nvidia-imex-ctl`` reports), the domain state (UP, DEGRADED, DOWN;
  UNKNOWN while the daemon is not READY), this node's view of each member's connection, the
  digest of the node map and the restart count.
- Kubernetes: condition ``cdo.dev/ImexReady`` on the node, written only by this agent: ``True``
  exactly while our daemon answers READY; ``False`` with a reason otherwise (NoClique,
  NotInRoster, ForeignImexDaemon, NotRunning, DaemonNotReady). The domain controller reads it.

**Members, not slots.** The node map lists every slot of the clique, and IMEX counts an empty
slot (its name resolves to the sentinel address) as a node that is down: on a partial rack its
own ``Domain State`` is DEGRADED for good. Empty slots are not members, so the agent reads the
``-N`` table over the members' slots only (:func:`member_domain_state`): UP when every member
is READY and every link between members CONNECTED, DOWN when no member is READY, DEGRADED in
between; ``peers`` lists the other members. A partial rack whose members all see each other is
UP, and a node that joins or leaves changes the domain state only while the change is under way.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from datetime import UTC, datetime

import msgspec

from services.imex_agent import names
from services.imex_agent.report import CONNECTED, READY, DomainReport
from services.imex_agent.roster import Roster
from shared.crds.names import IMEX_READY_CONDITION
from shared.events import ImexPeer, NodeImexState

NOT_RUNNING = "NOT_RUNNING"
UNKNOWN = "UNKNOWN"
DOMAIN_UP = "UP"
DOMAIN_DEGRADED = "DEGRADED"
DOMAIN_DOWN = "DOWN"


class Phase(enum.StrEnum):
    """Where the agent is with its node's daemon."""

    NO_CLIQUE = "NoClique"
    NOT_IN_ROSTER = "NotInRoster"
    FOREIGN = "Foreign"
    PROGRAMS_MISSING = "ProgramsMissing"  # nvidia-imex or nvidia-imex-ctl cannot be found
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


def member_slots(roster: Roster, own_slot: int | None) -> frozenset[int]:
    """The slots whose nodes count: the roster's members' and this node's own."""
    slots = {member.slot for member in roster.members}
    if own_slot is not None:
        slots.add(own_slot)
    return frozenset(slots)


def member_domain_state(domain: DomainReport, slots: Collection[int]) -> str:
    """The domain state over the nodes in ``slots`` (row and column index = slot).

    UP when each of them is READY and every link between two of them CONNECTED; DOWN when none
    is READY (or none is reported); DEGRADED otherwise. Empty slots do not count.
    """
    rows = [node for node in domain.nodes if node.index in slots]
    ready = [node.state == READY for node in rows]
    if not any(ready):
        return DOMAIN_DOWN
    linked = all(
        link.state == CONNECTED for node in rows for link in node.links if link.index in slots
    )
    if len(rows) == len(slots) and all(ready) and linked:
        return DOMAIN_UP
    return DOMAIN_DEGRADED


def peers_of(domain: DomainReport | None, *, address: str, roster: Roster) -> tuple[ImexPeer, ...]:
    """This node's view of every other member, in slot order (empty slots left out)."""
    if domain is None:
        return ()
    own = domain.row(address)
    if own is None:
        return ()
    peers = []
    for link in own.links:
        member = roster.at(link.index)
        if link.index == own.index or member is None:
            continue
        peers.append(
            ImexPeer(node=member.node, address=link.host or member.address, state=link.state)
        )
    return tuple(peers)


def node_event(
    observation: Observation,
    *,
    node: str,
    address: str,
    roster: Roster,
    slot: int | None = None,
) -> NodeImexState:
    """The event for one observation; ``slot`` is the running daemon's own slot."""
    control = observation.control
    ready = observation.daemon_state == READY
    domain = observation.domain if ready else None
    return NodeImexState(
        node=node,
        clique=control.clique,
        daemon_state=observation.daemon_state,
        domain_state=(
            member_domain_state(domain, member_slots(roster, slot))
            if domain is not None
            else UNKNOWN
        ),
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
    if control.phase is Phase.PROGRAMS_MISSING:
        return ConditionValue(
            status="False",
            reason=names.REASON_PROGRAMS_MISSING,
            message=f"the IMEX programs are missing; not starting a daemon{detail}",
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
    value: ConditionValue,
    *,
    transition: datetime,
    now: datetime,
    condition_type: str = IMEX_READY_CONDITION,
) -> dict[str, object]:
    """A strategic merge patch of ``nodes/<node>/status`` setting the condition (by default
    ``cdo.dev/ImexReady``); the patch merges conditions by type and leaves the others alone."""
    return {
        "status": {
            "conditions": [
                {
                    "type": condition_type,
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
