from __future__ import annotations

import pytest

from sim.imex.states import (
    ConnectionState,
    DaemonState,
    DomainState,
    LinkHistory,
    RefusalReason,
    connection_state,
    domain_state,
)

C = ConnectionState.CONNECTED
R = ConnectionState.RECOVERING
READY = DaemonState.READY


def test_a_link_that_never_came_up_is_never_connected() -> None:
    assert (
        connection_state(LinkHistory(), grace_time=-1, now=5.0) is ConnectionState.NEVER_CONNECTED
    )
    refused = LinkHistory().refused_by(RefusalReason.NODE_MAP_MISMATCH, 1.0)
    assert connection_state(refused, grace_time=0, now=5.0) is ConnectionState.NEVER_CONNECTED
    assert refused.refused is RefusalReason.NODE_MAP_MISMATCH


def test_a_connected_link_is_connected_and_forgets_an_old_refusal() -> None:
    history = LinkHistory().refused_by(RefusalReason.NODE_MAP_MISMATCH, 1.0).connected_to("i-1")

    assert connection_state(history, grace_time=-1, now=2.0) is C
    assert history.refused is None


def test_a_lost_link_recovers_forever_with_the_default_grace_time() -> None:
    lost = LinkHistory().connected_to("i-1").lost(10.0)

    assert connection_state(lost, grace_time=-1, now=10_000.0) is R


@pytest.mark.parametrize(
    ("grace", "now", "expected"),
    [
        (0, 10.0, ConnectionState.DISCONNECTED),
        (5, 14.9, ConnectionState.RECOVERING),
        (5, 15.0, ConnectionState.DISCONNECTED),
    ],
)
def test_a_lost_link_is_cleaned_up_when_the_grace_time_runs_out(
    grace: int, now: float, expected: ConnectionState
) -> None:
    lost = LinkHistory().connected_to("i-1").lost(10.0)

    assert connection_state(lost, grace_time=grace, now=now) is expected


def test_a_peer_that_says_goodbye_is_disconnected_at_once() -> None:
    gone = LinkHistory().connected_to("i-1").peer_shut_down(3.0)

    assert connection_state(gone, grace_time=-1, now=3.0) is ConnectionState.DISCONNECTED


def test_losing_a_link_that_is_not_up_changes_nothing() -> None:
    history = LinkHistory().connected_to("i-1").lost(1.0)

    assert history.lost(50.0) == history


def test_reconnecting_remembers_the_peer_instance() -> None:
    history = LinkHistory().connected_to("i-1").lost(1.0).connected_to("i-2")

    assert history.peer_instance == "i-2"
    assert history.ever_connected


@pytest.mark.parametrize(
    ("nodes", "links", "expected"),
    [
        ([READY, READY], [C, C, C, C], DomainState.UP),
        ([READY, READY], [C, R, C, C], DomainState.DEGRADED),
        ([READY, DaemonState.UNAVAILABLE], [C, R, ConnectionState.INVALID], DomainState.DEGRADED),
        ([READY, DaemonState.INITIALIZING], [C, C, C, C], DomainState.DEGRADED),
        ([DaemonState.UNAVAILABLE, DaemonState.UNAVAILABLE], [], DomainState.DOWN),
        ([DaemonState.SHUTTING_DOWN], [C], DomainState.DOWN),
        ([READY], [C], DomainState.UP),
    ],
)
def test_domain_state(
    nodes: list[DaemonState], links: list[ConnectionState], expected: DomainState
) -> None:
    assert domain_state(nodes, links) is expected


def test_every_connection_state_has_its_table_letter() -> None:
    letters = {state.letter for state in ConnectionState}

    assert letters == {"I", "N", "R", "D", "A", "C"}
