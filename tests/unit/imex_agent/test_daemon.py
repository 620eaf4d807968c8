"""The daemon controller's decisions over time: reload vs restart, settle, rate limits, backoff.

The integration tests run the simulated daemon; here a recording stand-in of the ``Imex`` handle
lets the timing rules be checked exactly and fast: what runs, with which files, how often.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from services.imex_agent.daemon import DaemonController, Target
from services.imex_agent.hostsfile import parse_block
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.report import DomainReport
from services.imex_agent.roster import MemberRecord, Roster, build_roster, slot_hostname
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import Phase
from shared.metrics import Metrics
from tests.support.wait import wait_for

CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"


class Process:
    def __init__(self, index: int) -> None:
        self.pid = 1000 + index
        self.reloads = 0
        self.exit_code: int | None = None
        self._exited = asyncio.Event()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.exit_code is not None
        return self.exit_code

    def reload(self) -> None:
        self.reloads += 1

    async def stop(self, *, timeout_s: float) -> int:
        self.crash(0)
        return 0

    def crash(self, code: int) -> None:
        self.exit_code = code
        self._exited.set()


class RecordingImex:
    """Starts nothing; remembers every start and the node map it was started with."""

    def __init__(self) -> None:
        self.processes: list[Process] = []
        self.maps: list[str] = []

    async def start(self, config: Path, *, output: Path) -> Process:
        self.maps.append((config.parent / "nodes_config.cfg").read_text())
        process = Process(len(self.processes))
        self.processes.append(process)
        return process

    async def query_state(self, config: Path) -> str:
        return "READY"

    async def query_domain(self, config: Path) -> DomainReport:
        return DomainReport(state="UP")


def roster(*members: tuple[str, int, str]) -> Roster:
    return build_roster(CLIQUE, [MemberRecord(node=n, slot=s, address=a) for n, s, a in members])


A, B = ("a", 0, "10.0.0.1"), ("b", 1, "10.0.0.2")


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.imex = RecordingImex()
        self.target = Target(clique=CLIQUE, roster=roster(A, B, ("c", 2, "10.0.0.3")))
        self.settings = ImexSettings(
            config_dir=str(tmp_path / "imex"),
            hosts_file=str(tmp_path / "hosts"),
            foreign_check=False,
            map_settle_s=0.4,
            reload_min_interval_s=0.4,
            restart_backoff_initial_s=0.1,
            restart_backoff_max_s=0.4,
            stable_after_s=30,
        )
        self.controller = DaemonController(
            node="a",
            address="10.0.0.1",
            settings=self.settings,
            imex=self.imex,
            target=lambda: self.target,
            metrics=AgentMetrics(Metrics()),
        )

    def set(self, value: Roster) -> None:
        self.target = Target(clique=CLIQUE, roster=value)
        self.controller.wake()

    def hosts(self) -> dict[str, str]:
        return parse_block(Path(self.settings.hosts_file).read_text())

    @property
    def current(self) -> Process:
        return self.imex.processes[-1]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    made = Harness(tmp_path)
    task = asyncio.create_task(made.controller.run())
    await wait_for(lambda: made.controller.running, timeout=5, what="daemon started")
    yield made
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_replacement_in_its_slot_is_a_reload_at_most_one_per_window(
    harness: Harness,
) -> None:
    harness.set(roster(A, B, ("c2", 2, "10.0.0.30")))
    await wait_for(lambda: harness.current.reloads == 1, timeout=5, what="first reload")
    assert harness.hosts()[slot_hostname(CLIQUE, 2)] == "10.0.0.30"
    harness.set(roster(A, B, ("c3", 2, "10.0.0.31")))
    await wait_for(
        lambda: harness.hosts()[slot_hostname(CLIQUE, 2)] == "10.0.0.31", timeout=5, what="hosts"
    )
    # Written in the same step that would have signalled: inside the window, SIGUSR1 waits.
    assert harness.current.reloads == 1
    await wait_for(lambda: harness.current.reloads == 2, timeout=5, what="second reload")
    assert len(harness.imex.processes) == 1
    assert harness.controller.restarts == 0


async def test_a_slot_that_empties_and_refills_within_the_settle_time_costs_no_restart(
    harness: Harness,
) -> None:
    harness.set(roster(A, B))
    await wait_for(lambda: harness.controller.map_change_pending, timeout=5, what="pending")
    assert len(harness.imex.processes) == 1
    # The vacated slot keeps its last address until the daemon is restarted without it.
    assert harness.hosts()[slot_hostname(CLIQUE, 2)] == "10.0.0.3"
    harness.set(roster(A, B, ("new", 2, "10.0.0.9")))
    await wait_for(lambda: harness.current.reloads == 1, timeout=5, what="reload")
    assert not harness.controller.map_change_pending
    # A later readdress is signalled only after the reload window, by when the settle time
    # of the vacancy has long passed: still the first daemon.
    harness.set(roster(A, ("b", 1, "10.0.0.20"), ("new", 2, "10.0.0.9")))
    await wait_for(lambda: harness.current.reloads == 2, timeout=5, what="second reload")
    assert len(harness.imex.processes) == 1
    assert harness.controller.restarts == 0


async def test_a_changed_set_of_slots_restarts_after_the_settle_time(harness: Harness) -> None:
    harness.set(roster(A, B))
    await wait_for(lambda: len(harness.imex.processes) == 2, timeout=5, what="restart")
    assert harness.imex.processes[0].exit_code == 0
    assert harness.controller.restarts == 1
    entries = [line for line in harness.imex.maps[-1].splitlines() if not line.startswith("#")]
    assert entries == [slot_hostname(CLIQUE, 0), slot_hostname(CLIQUE, 1)]
    assert set(harness.hosts()) == set(entries)


def started(harness: Harness, count: int) -> bool:
    return len(harness.imex.processes) == count


async def test_a_dying_daemon_is_restarted_with_a_doubling_backoff(harness: Harness) -> None:
    delays = []
    for attempt in range(4):
        harness.current.crash(-9)
        await wait_for(
            lambda: harness.controller.state.phase is Phase.WAITING, timeout=5, what="waiting"
        )
        delays.append(harness.controller.state.detail)
        await wait_for(partial(started, harness, attempt + 2), timeout=5, what="restart")
    assert [d.rsplit("restarting in ", 1)[1] for d in delays] == [
        "0.1 s",
        "0.2 s",
        "0.4 s",
        "0.4 s",
    ]
    assert all("exited with code -9" in d for d in delays)
    assert harness.controller.restarts == 4


def phase(harness: Harness) -> Phase:
    return harness.controller.state.phase


async def test_no_clique_or_not_a_member_means_no_daemon(harness: Harness) -> None:
    harness.target = Target(clique=None, detail="fabric registration not completed")
    harness.controller.wake()
    await wait_for(lambda: not harness.controller.running, timeout=5, what="stopped")
    assert phase(harness) is Phase.NO_CLIQUE
    harness.set(roster(B))
    await wait_for(lambda: phase(harness) is Phase.NOT_IN_ROSTER, timeout=5, what="phase")
    assert not harness.controller.running
    harness.set(roster(A, B))
    await wait_for(lambda: harness.controller.running, timeout=5, what="running again")
