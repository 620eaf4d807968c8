"""The daemon controller with a static node map: membership re-points names, never restarts.

:func:`decide` is checked as a table; the controller over time with a recording stand-in of the
``Imex`` handle, so the timing rules (SIGUSR1 pacing, the leave grace, the restart backoff) are
checked exactly and fast: what runs, with which files, how often.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from services.imex_agent.binaries import NotAdoptableError
from services.imex_agent.daemon import (
    Action,
    DaemonController,
    Serving,
    Target,
    decide,
    digest,
    reload_wait,
    served_hosts,
)
from services.imex_agent.hostsfile import parse_block
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.preflight import DaemonRecord, ProcessIdentity, read_record
from services.imex_agent.report import DomainReport
from services.imex_agent.roster import (
    MemberRecord,
    Roster,
    build_roster,
    render_nodes_config,
    slot_hostname,
    slot_hostnames,
)
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import Phase
from shared.metrics import Metrics
from tests.support.wait import wait_for

CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
OTHER = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a11.1"
SENTINEL = "127.255.255.254"


def roster(*members: tuple[str, int, str], clique: str = CLIQUE) -> Roster:
    return build_roster(clique, [MemberRecord(node=n, slot=s, address=a) for n, s, a in members])


A, B, C = ("a", 0, "10.0.0.1"), ("b", 1, "10.0.0.2"), ("c", 2, "10.0.0.3")

# -- decide, the pure rule ------------------------------------------------------------------------

MAP = render_nodes_config(CLIQUE, slots=18)
SERVING = Serving(clique=CLIQUE, slot=0, config_digest=digest("cfg"), map_digest=digest(MAP))


def decision(
    target: Target,
    serving: Serving | None = SERVING,
    *,
    config: str = "cfg",
    left_since: float | None = None,
    now: float = 100.0,
) -> tuple[Action, str, Phase]:
    nodes_config = (
        render_nodes_config(target.clique, slots=18) if target.clique is not None else None
    )
    made = decide(
        node="a",
        target=target,
        serving=serving,
        config=config,
        nodes_config=nodes_config,
        left_since=left_since,
        now=now,
        grace_s=10.0,
    )
    return made.action, made.reason, made.phase


@pytest.mark.parametrize(
    ("target", "serving", "kwargs", "expected"),
    [
        pytest.param(
            Target(clique=CLIQUE, roster=roster(A)),
            None,
            {},
            (Action.START, "", Phase.RUNNING),
            id="member-not-running-starts",
        ),
        pytest.param(
            Target(clique=None), None, {}, (Action.IDLE, "", Phase.NO_CLIQUE), id="no-clique-idle"
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(B)),
            None,
            {},
            (Action.IDLE, "", Phase.NOT_IN_ROSTER),
            id="not-a-member-idle",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(A, B, C)),
            SERVING,
            {},
            (Action.KEEP, "", Phase.RUNNING),
            id="join-is-a-keep",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(A)),
            SERVING,
            {},
            (Action.KEEP, "", Phase.RUNNING),
            id="leave-of-another-is-a-keep",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(A, ("b", 1, "10.0.9.9"))),
            SERVING,
            {},
            (Action.KEEP, "", Phase.RUNNING),
            id="readdress-is-a-keep",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(A)),
            SERVING,
            {"config": "other"},
            (Action.RESTART, "config", Phase.RUNNING),
            id="own-config-cfg-changed-restarts",
        ),
        pytest.param(
            Target(clique=CLIQUE),
            SERVING,
            {"config": "other"},
            (Action.WAIT, "", Phase.RUNNING),
            id="adopted-before-the-roster-is-known-waits",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(A)),
            Serving(clique=CLIQUE, slot=0, config_digest=digest("cfg"), map_digest=""),
            {},
            (Action.RESTART, "node_map", Phase.RUNNING),
            id="adopted-from-a-record-without-its-map-restarts",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(("a", 5, "10.0.0.1"))),
            SERVING,
            {},
            (Action.RESTART, "node_map", Phase.RUNNING),
            id="own-slot-changed-restarts",
        ),
        pytest.param(
            Target(clique=OTHER, roster=roster(A, clique=OTHER)),
            SERVING,
            {},
            (Action.RESTART, "node_map", Phase.RUNNING),
            id="another-clique-restarts",
        ),
        pytest.param(
            Target(clique=OTHER),
            SERVING,
            {},
            (Action.STOP, "node_map", Phase.NOT_IN_ROSTER),
            id="another-clique-not-listed-yet-stops",
        ),
        pytest.param(
            Target(clique=None),
            SERVING,
            {},
            (Action.HOLD, "", Phase.RUNNING),
            id="clique-lost-holds",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(B)),
            SERVING,
            {"left_since": 95.0},
            (Action.HOLD, "", Phase.RUNNING),
            id="out-of-roster-holds-within-the-grace",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(B)),
            SERVING,
            {"left_since": 90.0},
            (Action.STOP, "roster", Phase.NOT_IN_ROSTER),
            id="out-of-roster-past-the-grace-stops",
        ),
        pytest.param(
            Target(clique=None),
            SERVING,
            {"left_since": 80.0},
            (Action.STOP, "roster", Phase.NO_CLIQUE),
            id="clique-lost-past-the-grace-stops",
        ),
        pytest.param(
            Target(clique=CLIQUE, roster=roster(("rival", 0, "10.0.0.7"))),
            SERVING,
            {},
            (Action.STOP, "roster", Phase.NOT_IN_ROSTER),
            id="a-rival-in-its-slot-stops-at-once",
        ),
    ],
)
def test_decide(
    target: Target,
    serving: Serving | None,
    kwargs: dict[str, object],
    expected: tuple[Action, str, Phase],
) -> None:
    assert decision(target, serving, **kwargs) == expected  # type: ignore[arg-type]


def test_reload_wait_counts_the_window_from_the_last_signal() -> None:
    assert reload_wait(last_reload=10.0, interval_s=5.0, now=12.0) == 3.0
    assert reload_wait(last_reload=10.0, interval_s=5.0, now=15.0) == 0.0
    assert reload_wait(last_reload=10.0, interval_s=0.0, now=10.0) == 0.0


def test_served_hosts_pin_the_own_slot_and_point_empty_slots_at_the_sentinel() -> None:
    hosts = served_hosts(roster(B), empty=SENTINEL, own_slot=0, own_address="10.0.0.1")
    assert list(hosts) == list(slot_hostnames(CLIQUE, 18))
    assert hosts[slot_hostname(CLIQUE, 0)] == "10.0.0.1"  # held: out of the roster, still itself
    assert hosts[slot_hostname(CLIQUE, 1)] == "10.0.0.2"
    assert {hosts[slot_hostname(CLIQUE, slot)] for slot in range(2, 18)} == {SENTINEL}


# -- the controller over time ---------------------------------------------------------------------


class Process:
    def __init__(self, index: int) -> None:
        self.pid = 1000 + index
        self.reloads = 0
        self.handler_installed = True
        self.reload_checks = 0
        """Times the controller asked whether a SIGUSR1 would reach the handler."""
        self.released = False
        self.exit_code: int | None = None
        self._exited = asyncio.Event()

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(pid=self.pid, start_time=7)

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.exit_code is not None
        return self.exit_code

    def reload(self) -> None:
        self.reloads += 1

    def takes_reload(self) -> bool:
        self.reload_checks += 1
        return self.handler_installed

    async def stop(self, *, timeout_s: float) -> int:
        self.crash(0)
        return 0

    def release(self) -> None:
        self.released = True

    def crash(self, code: int) -> None:
        self.exit_code = code
        self._exited.set()


class RecordingImex:
    """Starts nothing; remembers every start and the node map it was started with, and adopts
    the processes it started that still run."""

    def __init__(self) -> None:
        self.processes: list[Process] = []
        self.maps: list[str] = []
        self.adoptions: list[DaemonRecord] = []
        self.missing: tuple[str, ...] = ()

    async def start(self, config: Path, *, output: Path) -> Process:
        self.maps.append((config.parent / "nodes_config.cfg").read_text())
        process = Process(len(self.processes))
        self.processes.append(process)
        return process

    def adopt(self, record: DaemonRecord, *, config: Path) -> Process:
        self.adoptions.append(record)
        for process in self.processes:
            if process.identity == record.process and process.exit_code is None:
                process.released = False
                return process
        raise NotAdoptableError(f"no process {record.process.pid}")

    async def query_state(self, config: Path) -> str:
        return "READY"

    async def query_domain(self, config: Path) -> DomainReport:
        return DomainReport(state="UP")

    def missing_programs(self) -> tuple[str, ...]:
        return self.missing


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        *,
        leave_grace_s: float = 0.4,
        imex: RecordingImex | None = None,
        **overrides: Any,
    ) -> None:
        self.imex = imex or RecordingImex()
        self.target = Target(clique=CLIQUE, roster=roster(A, B, C))
        self.settings = ImexSettings(
            config_dir=str(tmp_path / "imex"),
            hosts_file=str(tmp_path / "hosts"),
            foreign_check=False,
            leave_grace_s=leave_grace_s,
            reload_min_interval_s=0.4,
            restart_backoff_initial_s=0.1,
            restart_backoff_max_s=0.4,
            stable_after_s=30,
            **overrides,
        )
        self.registry = Metrics()
        self.metrics = AgentMetrics(self.registry)
        self.controller = DaemonController(
            node="a",
            address="10.0.0.1",
            settings=self.settings,
            imex=self.imex,
            target=lambda: self.target,
            metrics=self.metrics,
        )

    @property
    def record_file(self) -> Path:
        return Path(self.settings.config_dir) / "nvidia-imex.pid"

    def set(self, value: Roster | None, *, clique: str | None = CLIQUE, detail: str = "") -> None:
        self.target = Target(clique=clique, roster=value, detail=detail)
        self.controller.wake()

    def hosts(self) -> dict[str, str]:
        return parse_block(Path(self.settings.hosts_file).read_text())

    def address_of(self, slot: int) -> str:
        return self.hosts()[slot_hostname(CLIQUE, slot)]

    def nodes_config(self) -> str:
        return (Path(self.settings.config_dir) / "nodes_config.cfg").read_text()

    @property
    def current(self) -> Process:
        return self.imex.processes[-1]


@contextlib.asynccontextmanager
async def running(made: Harness) -> AsyncIterator[Harness]:
    task = asyncio.create_task(made.controller.run())
    await wait_for(lambda: made.controller.running, timeout=5, what="daemon started")
    try:
        yield made
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running(Harness(tmp_path)) as made:
        yield made


async def test_the_first_start_writes_every_slot_and_points_empty_ones_at_the_sentinel(
    harness: Harness,
) -> None:
    entries = [line for line in harness.imex.maps[0].splitlines() if not line.startswith("#")]
    assert entries == list(slot_hostnames(CLIQUE, 18))
    assert harness.nodes_config() == render_nodes_config(CLIQUE, slots=18)
    assert [harness.address_of(slot) for slot in range(3)] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert {harness.address_of(slot) for slot in range(3, 18)} == {SENTINEL}
    assert harness.controller.slot == 0


async def test_join_leave_and_readdress_re_point_names_and_never_restart(
    harness: Harness,
) -> None:
    map_before = harness.nodes_config()
    steps = [
        (roster(A, B, C, ("d", 7, "10.0.0.8")), 7, "10.0.0.8"),  # a node joins
        (roster(A, B, ("d", 7, "10.0.0.8")), 2, SENTINEL),  # a node leaves (a fault, power off)
        (roster(A, ("b", 1, "10.0.9.2"), ("d", 7, "10.0.0.8")), 1, "10.0.9.2"),  # new address
        (roster(A, ("b", 1, "10.0.9.2"), C, ("d", 7, "10.0.0.8")), 2, "10.0.0.3"),  # recovery
    ]
    for number, (members, slot, address) in enumerate(steps, start=1):
        harness.set(members)
        await wait_for(
            lambda s=slot, a=address: harness.address_of(s) == a,  # type: ignore[misc]
            timeout=5,
            what=f"slot {slot} -> {address}",
        )
        await wait_for(
            lambda n=number: harness.current.reloads == n,  # type: ignore[misc]
            timeout=5,
            what=f"SIGUSR1 #{number}",
        )
    assert len(harness.imex.processes) == 1
    assert harness.controller.restarts == 0
    assert harness.nodes_config() == map_before


async def test_a_change_inside_the_sigusr1_window_is_signalled_when_it_ends(
    harness: Harness,
) -> None:
    harness.set(roster(A, B, ("c2", 2, "10.0.0.30")))
    await wait_for(lambda: harness.current.reloads == 1, timeout=5, what="first reload")
    assert harness.address_of(2) == "10.0.0.30"
    harness.set(roster(A, B, ("c3", 2, "10.0.0.31")))
    await wait_for(lambda: harness.address_of(2) == "10.0.0.31", timeout=5, what="hosts")
    # Written in the same step that would have signalled: inside the window, SIGUSR1 waits.
    assert harness.current.reloads == 1
    await wait_for(lambda: harness.current.reloads == 2, timeout=5, what="second reload")
    assert len(harness.imex.processes) == 1
    assert harness.controller.restarts == 0


async def test_a_daemon_still_starting_gets_its_sigusr1_only_once_it_handles_it(
    harness: Harness,
) -> None:
    harness.current.handler_installed = False  # its SIGUSR1 handler is not installed yet
    harness.set(roster(A, B, ("c2", 2, "10.0.0.30")))
    await wait_for(lambda: harness.address_of(2) == "10.0.0.30", timeout=5, what="hosts")
    # Past the SIGUSR1 window the signal is owed, but it would end a daemon still starting:
    # asked twice (a step, and its recheck), the controller sent nothing.
    await wait_for(lambda: harness.current.reload_checks >= 2, timeout=5, what="rechecks")
    assert harness.current.reloads == 0
    harness.current.handler_installed = True
    await wait_for(lambda: harness.current.reloads == 1, timeout=5, what="the owed SIGUSR1")
    assert len(harness.imex.processes) == 1
    assert harness.controller.restarts == 0


async def test_a_node_that_leaves_and_rejoins_within_the_grace_keeps_its_daemon(
    tmp_path: Path,
) -> None:
    async with running(Harness(tmp_path, leave_grace_s=30.0)) as harness:
        harness.set(roster(B, C))  # its own label went away (a fabric fault, say)
        await wait_for(lambda: harness.controller.holding, timeout=5, what="holding")
        assert harness.controller.running
        assert harness.controller.state.phase is Phase.RUNNING
        assert "left clique" in harness.controller.state.detail
        assert harness.address_of(0) == "10.0.0.1", "its own slot still resolves to itself"
        # And then NVML reports no clique for a while.
        harness.set(None, clique=None, detail="fabric registration not completed")
        await wait_for(
            lambda: "(fabric registration not completed)" in harness.controller.state.detail,
            timeout=5,
            what="no clique",
        )
        assert harness.controller.running
        harness.set(roster(A, B, C))
        await wait_for(lambda: not harness.controller.holding, timeout=5, what="member again")
        assert harness.controller.state.detail == ""
        assert len(harness.imex.processes) == 1
        assert harness.controller.restarts == 0


async def test_a_node_out_of_its_clique_past_the_grace_stops_its_daemon(harness: Harness) -> None:
    harness.set(roster(B, C))
    await wait_for(lambda: not harness.controller.running, timeout=5, what="stopped")
    assert harness.controller.state.phase is Phase.NOT_IN_ROSTER
    harness.set(roster(A, B, C))
    await wait_for(lambda: harness.controller.running, timeout=5, what="running again")
    assert harness.controller.restarts == 1  # its own daemon, after it had left


async def test_a_rival_in_its_slot_stops_its_daemon_at_once(tmp_path: Path) -> None:
    async with running(Harness(tmp_path, leave_grace_s=60.0)) as harness:
        harness.set(roster(("rival", 0, "10.0.0.70"), B, C))
        await wait_for(lambda: not harness.controller.running, timeout=5, what="stopped")
        assert harness.controller.state.phase is Phase.NOT_IN_ROSTER


async def test_a_new_clique_is_a_new_node_map_and_a_restart(harness: Harness) -> None:
    harness.set(roster(A, clique=OTHER), clique=OTHER)
    await wait_for(lambda: len(harness.imex.processes) == 2, timeout=5, what="restart")
    assert harness.imex.processes[0].exit_code == 0
    assert harness.controller.restarts == 1
    assert harness.imex.maps[-1] == render_nodes_config(OTHER, slots=18)


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
    # Every start used the same, complete map.
    assert set(harness.imex.maps) == {render_nodes_config(CLIQUE, slots=18)}


async def test_no_member_no_daemon(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.target = Target(clique=CLIQUE, roster=roster(B))
    task = asyncio.create_task(harness.controller.run())
    try:
        await wait_for(
            lambda: harness.controller.state.phase is Phase.NOT_IN_ROSTER,
            timeout=5,
            what="not in roster",
        )
        assert not harness.controller.running
        harness.set(roster(A, B))
        await wait_for(lambda: harness.controller.running, timeout=5, what="started")
        assert harness.controller.restarts == 0
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_without_the_imex_programs_no_daemon_is_started_and_the_state_says_so(
    tmp_path: Path,
) -> None:
    harness = Harness(tmp_path, poll_interval_s=0.05)
    harness.imex.missing = ("nvidia-imex", "nvidia-imex-ctl")
    task = asyncio.create_task(harness.controller.run())
    try:
        await wait_for(
            lambda: harness.controller.state.phase is Phase.PROGRAMS_MISSING,
            timeout=5,
            what="programs missing",
        )
        assert not harness.controller.running and harness.imex.processes == []
        assert "nvidia-imex, nvidia-imex-ctl not found" in harness.controller.state.detail
        harness.imex.missing = ()  # the package installed: the next look starts the daemon
        await wait_for(lambda: harness.controller.running, timeout=5, what="started")
        assert harness.controller.state.phase is Phase.RUNNING
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- an agent that goes and one that comes: adoption ---------------------------------------------


def counter(harness: Harness, name: str, **labels: str) -> float:
    value = harness.registry.registry.get_sample_value(f"cdo_imex_daemon_{name}_total", labels)
    return value or 0.0


async def left_running(tmp_path: Path) -> tuple[RecordingImex, Process]:
    """A first agent's controller that started a daemon and went away (its task cancelled)."""
    first = Harness(tmp_path)
    async with running(first):
        await wait_for(lambda: first.controller.roster is not None, timeout=5, what="roster")
    process = first.current
    assert process.exit_code is None, "the daemon outlives its agent"
    assert process.released
    record = read_record(first.record_file)
    assert record is not None and record.process == process.identity
    assert record.clique == CLIQUE and record.slot == 0
    return first.imex, process


async def test_an_agent_that_goes_leaves_its_daemon_and_record(tmp_path: Path) -> None:
    await left_running(tmp_path)


async def test_the_next_agent_adopts_the_daemon_without_a_restart_or_a_signal(
    tmp_path: Path,
) -> None:
    imex, process = await left_running(tmp_path)
    hosts_before = (tmp_path / "hosts").read_text()
    second = Harness(tmp_path, imex=imex)
    assert second.controller.adopt()
    assert second.controller.running and second.controller.pid == process.pid
    assert second.controller.adopted
    assert second.controller.state.phase is Phase.RUNNING
    async with running(second):
        await wait_for(
            lambda: second.controller.roster is not None and second.controller.roster.members,
            timeout=5,
            what="the roster applied to the adopted daemon",
        )
        assert len(imex.processes) == 1, "no new daemon"
        assert process.reloads == 0, "the same mapping: no SIGUSR1"
        assert (tmp_path / "hosts").read_text() == hosts_before
        assert second.controller.restarts == 0
        assert counter(second, "adoptions", result="adopted") == 1
        # A membership change afterwards is applied to the adopted daemon as to any.
        second.set(roster(A, B))
        await wait_for(lambda: process.reloads == 1, timeout=5, what="SIGUSR1")
        assert second.address_of(2) == SENTINEL
    assert len(imex.processes) == 1


async def test_the_roster_is_awaited_before_an_adopted_daemon_is_judged(tmp_path: Path) -> None:
    imex, process = await left_running(tmp_path)
    second = Harness(tmp_path, imex=imex, log_level=1)  # another config.cfg
    second.target = Target(clique=CLIQUE, detail="waiting for the clique's Node list")
    assert second.controller.adopt()
    task = asyncio.create_task(second.controller.run())
    try:
        for _ in range(3):
            second.controller.wake()
            await asyncio.sleep(0.05)
        assert second.controller.state.phase is Phase.RUNNING
        assert process.exit_code is None and len(imex.processes) == 1
        second.set(roster(A, B, C))  # the Node list arrives: now the new config counts
        await wait_for(lambda: len(imex.processes) == 2, timeout=5, what="the restart")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_adopted_daemon_of_another_config_is_restarted_once(tmp_path: Path) -> None:
    imex, process = await left_running(tmp_path)
    second = Harness(tmp_path, imex=imex, log_level=1)  # another config.cfg
    assert second.controller.adopt()
    async with running(second):
        await wait_for(lambda: len(imex.processes) == 2, timeout=5, what="the restart")
        await wait_for(lambda: second.controller.running, timeout=5, what="running again")
        for _ in range(3):
            second.controller.wake()
            await asyncio.sleep(0.05)
        assert process.exit_code == 0, "stopped"
        assert len(imex.processes) == 2, "restarted once"
        assert second.controller.restarts == 1
        assert counter(second, "starts", reason="config") == 1
        record = read_record(second.record_file)
        assert record is not None and record.process == second.current.identity


async def test_a_record_of_no_running_daemon_is_dropped_and_a_daemon_started(
    tmp_path: Path,
) -> None:
    imex, process = await left_running(tmp_path)
    process.crash(-9)  # it died while no agent watched
    second = Harness(tmp_path, imex=imex)
    assert not second.controller.adopt()
    assert not second.record_file.exists()
    assert counter(second, "adoptions", result="stale") == 1
    async with running(second):
        assert len(imex.processes) == 2
        assert second.controller.restarts == 0  # a first start for this agent


async def test_stop_on_exit_takes_the_daemon_along(tmp_path: Path) -> None:
    harness = Harness(tmp_path, stop_on_exit=True)
    async with running(harness):
        pass
    assert harness.current.exit_code == 0
    assert not harness.record_file.exists()
