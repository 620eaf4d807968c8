"""IMEX daemon restarts from two readings of the node host's counters, and how they read."""

from __future__ import annotations

from sim.control import ImexCount, imex_restarts
from sim.demo.restarts import restarts_phrase


def counts(**started: tuple[int, int | None]) -> dict[str, ImexCount]:
    return {
        node: ImexCount(node=node, daemons_started=daemons, agent_restarts=agent)
        for node, (daemons, agent) in started.items()
    }


def test_no_new_daemon_is_no_restart() -> None:
    before = counts(a=(1, 0), b=(1, 0))
    assert imex_restarts(before, before) == {"a": 0, "b": 0}


def test_a_new_instance_or_a_rise_of_the_agents_counter_is_a_restart_counted_once() -> None:
    before = counts(a=(1, 0), b=(1, 0), c=(2, 1))
    after = counts(a=(3, 2), b=(2, 0), c=(2, 3))
    # a: two new instances, the agent counted both; b: a new instance under a fresh agent
    # (a power cycle); c: the agent counts two more than the instances show (taken the larger).
    assert imex_restarts(before, after) == {"a": 2, "b": 1, "c": 2}


def test_a_node_first_seen_later_or_without_a_daemon_at_first_counts_its_first_start_as_none() -> (
    None
):
    before = counts(a=(0, None))
    after = counts(a=(1, 0), b=(2, 1))
    assert imex_restarts(before, after) == {"a": 0, "b": 1}


def test_an_agent_that_started_afresh_counts_from_zero() -> None:
    before = counts(a=(1, 4))
    after = counts(a=(2, 1))  # a new agent counted one restart since it started
    assert imex_restarts(before, after) == {"a": 1}
    assert imex_restarts(counts(a=(1, 0)), counts(a=(1, None))) == {"a": 0}  # agent gone


def test_the_phrase_names_the_nodes_that_restarted() -> None:
    assert restarts_phrase({"a": 0, "b": 0}) == "0 on 2 nodes"
    assert restarts_phrase({"rack-1-tray05": 1, "rack-1-tray02": 2, "x": 0}) == (
        "3 (rack-1-tray02 2, rack-1-tray05 1) on 3 nodes"
    )
    assert restarts_phrase({"a": 0}) == "0 on 1 node"
