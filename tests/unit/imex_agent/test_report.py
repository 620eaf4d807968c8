"""Reading nvidia-imex-ctl's output, and what the agent reports from it."""

from __future__ import annotations

import datetime as dt

import pytest

from services.imex_agent.report import ReportError, parse_domain_report, parse_state
from services.imex_agent.roster import MemberRecord, build_roster
from services.imex_agent.status import (
    ControlState,
    Observation,
    Phase,
    condition_patch,
    condition_value,
    member_domain_state,
    member_slots,
    node_event,
    same_report,
)
from shared.events import NodeImexState
from sim.imex.report import CellView, DomainView, NodeView, render_json
from sim.imex.states import ConnectionState, DaemonState, DomainState

CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
ADDRESSES = ("10.0.0.1", "10.0.0.2", "10.0.0.3")


def view(states: list[list[ConnectionState]], daemons: list[DaemonState]) -> DomainView:
    nodes = tuple(
        NodeView(
            index=index,
            host=ADDRESSES[index],
            hostname=None,
            status=daemons[index],
            version="580.95.05",
            connections=tuple(
                CellView(host=ADDRESSES[column], status=state) for column, state in enumerate(row)
            ),
        )
        for index, row in enumerate(states)
    )
    return DomainView(
        nodes=nodes, status=DomainState.DEGRADED, taken_at=dt.datetime(2025, 3, 25, 10, 39, 43)
    )


C, R, INVALID = ConnectionState.CONNECTED, ConnectionState.RECOVERING, ConnectionState.INVALID
READY, UNAVAILABLE = DaemonState.READY, DaemonState.UNAVAILABLE
ROSTER = build_roster(
    CLIQUE,
    [
        MemberRecord(node=f"node-{i}", address=address, slot=i)
        for i, address in enumerate(ADDRESSES)
    ],
)
RUNNING = ControlState(phase=Phase.RUNNING, clique=CLIQUE, restarts=2, config_digest="abc")


def degraded() -> str:
    return render_json(view([[C, C, R], [C, C, R], [INVALID] * 3], [READY, READY, UNAVAILABLE]))


def test_domain_report_as_the_ctl_prints_it() -> None:
    report = parse_domain_report(degraded())
    assert report.state == "DEGRADED"
    assert [(node.index, node.host, node.state) for node in report.nodes] == [
        (0, "10.0.0.1", "READY"),
        (1, "10.0.0.2", "READY"),
        (2, "10.0.0.3", "UNAVAILABLE"),
    ]
    own = report.row("10.0.0.2")
    assert own is not None
    assert [link.state for link in own.links] == ["CONNECTED", "CONNECTED", "RECOVERING"]


@pytest.mark.parametrize(
    "text", ["", "not json", '{"nodes": {}}', '{"status": "UP", "nodes": {"x": {"status": "R"}}}']
)
def test_unreadable_reports_raise(text: str) -> None:
    with pytest.raises(ReportError):
        parse_domain_report(text)


@pytest.mark.parametrize(
    ("stdout", "state"),
    [("READY\n", "READY"), ("\nINITIALIZING\n", "INITIALIZING"), ("", "UNAVAILABLE")],
)
def test_state_line(stdout: str, state: str) -> None:
    assert parse_state(stdout) == state


def test_event_names_peers_by_the_roster_and_views_from_this_node() -> None:
    observation = Observation(
        control=RUNNING, daemon_state="READY", domain=parse_domain_report(degraded())
    )
    event = node_event(observation, node="node-1", address="10.0.0.2", roster=ROSTER)
    assert event.daemon_state == "READY"
    assert event.domain_state == "DEGRADED"
    assert [(p.node, p.address, p.state) for p in event.peers] == [
        ("node-0", "10.0.0.1", "CONNECTED"),
        ("node-2", "10.0.0.3", "RECOVERING"),
    ]
    assert (event.clique, event.restarts, event.config_digest) == (CLIQUE, 2, "abc")
    value = condition_value(observation, event)
    assert (value.status, value.reason) == ("True", "ImexReady")
    assert "1/2 peers connected" in value.message
    again = node_event(observation, node="node-1", address="10.0.0.2", roster=ROSTER)
    assert again.id != event.id
    assert same_report(event, again)
    assert not same_report(None, again)


@pytest.mark.parametrize(
    ("control", "daemon_state", "status", "reason"),
    [
        (
            ControlState(phase=Phase.NO_CLIQUE, detail="fabric pending"),
            "NOT_RUNNING",
            "False",
            "NoClique",
        ),
        (
            ControlState(phase=Phase.NOT_IN_ROSTER, clique=CLIQUE),
            "NOT_RUNNING",
            "False",
            "NotInRoster",
        ),
        (
            ControlState(phase=Phase.FOREIGN, clique=CLIQUE),
            "NOT_RUNNING",
            "False",
            "ForeignImexDaemon",
        ),
        (
            ControlState(phase=Phase.PROGRAMS_MISSING, clique=CLIQUE, detail="nvidia-imex"),
            "NOT_RUNNING",
            "False",
            "ImexProgramsMissing",
        ),
        (
            ControlState(phase=Phase.WAITING, clique=CLIQUE, detail="exited with code -9"),
            "NOT_RUNNING",
            "False",
            "NotRunning",
        ),
        (RUNNING, "INITIALIZING", "False", "DaemonNotReady"),
        (RUNNING, "UNAVAILABLE", "False", "DaemonNotReady"),
    ],
)
def test_condition_is_true_only_while_ready(
    control: ControlState, daemon_state: str, status: str, reason: str
) -> None:
    observation = Observation(control=control, daemon_state=daemon_state)
    event = node_event(observation, node="node-1", address="10.0.0.2", roster=ROSTER)
    assert event.domain_state == "UNKNOWN"
    assert event.peers == ()
    value = condition_value(observation, event)
    assert (value.status, value.reason) == (status, reason)


def test_condition_patch_is_a_status_patch_merged_by_type() -> None:
    now = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    observation = Observation(control=RUNNING, daemon_state="INITIALIZING")
    event = node_event(observation, node="n", address="10.0.0.2", roster=ROSTER)
    patch = condition_patch(condition_value(observation, event), transition=now, now=now)
    (condition,) = patch["status"]["conditions"]  # type: ignore[index]
    assert condition["type"] == "cdo.dev/ImexReady"
    assert condition["lastTransitionTime"] == "2025-01-02T03:04:05Z"


# -- a static map: the domain state and the peers over the members only ---------------------------

SENTINEL = "127.255.255.254"
MEMBER_SLOTS = (0, 4, 9)
"""A partial rack: three members; the other 15 of the 18 slots are empty."""


def partial_rack(
    *, member_links: dict[tuple[int, int], ConnectionState] | None = None
) -> DomainView:
    """An 18-slot ``-N`` view as IMEX gives it: empty slots unreachable at the sentinel."""
    hosts = [f"10.0.0.{slot + 1}" if slot in MEMBER_SLOTS else SENTINEL for slot in range(18)]
    links = member_links or {}
    nodes = []
    for row in range(18):
        if row not in MEMBER_SLOTS:
            cells = tuple(CellView(host=host, status=INVALID) for host in hosts)
            nodes.append(
                NodeView(
                    index=row,
                    host=hosts[row],
                    hostname=None,
                    status=UNAVAILABLE,
                    version=None,
                    connections=cells,
                )
            )
            continue
        cells = tuple(
            CellView(
                host=host,
                status=links.get((row, column), C)
                if column in MEMBER_SLOTS
                else ConnectionState.NEVER_CONNECTED,
            )
            for column, host in enumerate(hosts)
        )
        nodes.append(
            NodeView(
                index=row,
                host=hosts[row],
                hostname=None,
                status=READY,
                version="580.95.05",
                connections=cells,
            )
        )
    # What IMEX itself says of a partial rack: empty slots are down nodes.
    return DomainView(
        nodes=tuple(nodes), status=DomainState.DEGRADED, taken_at=dt.datetime(2025, 3, 25)
    )


PARTIAL = build_roster(
    CLIQUE,
    [
        MemberRecord(node=f"tray-{slot}", address=f"10.0.0.{slot + 1}", slot=slot)
        for slot in (0, 4, 9)
    ],
)


def partial_event(view: DomainView) -> NodeImexState:
    observation = Observation(
        control=RUNNING, daemon_state="READY", domain=parse_domain_report(render_json(view))
    )
    return node_event(observation, node="tray-4", address="10.0.0.5", roster=PARTIAL, slot=4)


def test_a_partial_rack_whose_members_see_each_other_is_up() -> None:
    event = partial_event(partial_rack())
    assert event.domain_state == "UP"
    assert [(p.node, p.address, p.state) for p in event.peers] == [
        ("tray-0", "10.0.0.1", "CONNECTED"),
        ("tray-9", "10.0.0.10", "CONNECTED"),
    ], "empty slots are not peers"


def test_a_member_link_down_degrades_and_no_ready_member_is_down() -> None:
    broken = partial_rack(member_links={(0, 9): R})
    assert partial_event(broken).domain_state == "DEGRADED"
    report = parse_domain_report(render_json(partial_rack()))
    assert member_domain_state(report, {3, 5}) == "DOWN", "only empty slots: nobody READY"
    assert member_domain_state(report, {0, 4, 9, 12}) == "DEGRADED", "a member not reported READY"
    assert member_domain_state(report, set(MEMBER_SLOTS)) == "UP"


def test_member_slots_include_the_own_slot_of_a_held_daemon() -> None:
    assert member_slots(PARTIAL, None) == {0, 4, 9}
    assert member_slots(PARTIAL, 7) == {0, 4, 7, 9}
