"""No channel without IMEX: the readiness decision (pure) and the driver's bounded wait on it.

The decision is table-tested; the driver runs with real checkpoint, device and CDI stores in a
temporary directory, a resolver that answers one fixed grant, and a readiness source the test
changes. Waits are bounded by the driver's own ``ready_wait_s`` or by ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.imex_agent.cdi import CdiStore, ChannelGrant, SliceSeat
from services.imex_agent.channels import ChannelDevices
from services.imex_agent.checkpoint import CheckpointStore, DeviceRecord
from services.imex_agent.claims import ClaimRefusedError, Resolution
from services.imex_agent.driver import ChannelDriver
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.readiness import (
    ImexReadiness,
    ReadinessSignal,
    imex_refusal,
    not_ready_message,
    readiness_of,
)
from services.imex_agent.report import READY
from services.imex_agent.status import NOT_RUNNING, UNKNOWN, ControlState, Phase
from shared.events import NodeImexState
from shared.kubeletapi import Claim
from shared.metrics import Metrics

CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
OTHER = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.2"
CLAIM = Claim(namespace="ml", uid="c-1", name="train-0-channel")
RUNNING_READY = ImexReadiness(phase=Phase.RUNNING, clique=CLIQUE, daemon_state=READY)
WAITING = ImexReadiness(
    phase=Phase.WAITING, clique=CLIQUE, detail="exited with code -9; restarting in 3.0 s"
)


def event(*, state: str = READY, restarts: int = 0, clique: str = CLIQUE) -> NodeImexState:
    return NodeImexState(node="n1", clique=clique, daemon_state=state, restarts=restarts)


# -- readiness_of: what the agent knows, as prepare sees it ---------------------------------------


@pytest.mark.parametrize(
    ("control", "last", "expected"),
    [
        pytest.param(
            ControlState(phase=Phase.NO_CLIQUE, detail="fabric not registered"),
            None,
            ImexReadiness(phase=Phase.NO_CLIQUE, detail="fabric not registered"),
            id="no clique",
        ),
        pytest.param(
            ControlState(phase=Phase.WAITING, clique=CLIQUE, detail="exited with code 1"),
            event(),
            ImexReadiness(phase=Phase.WAITING, clique=CLIQUE, detail="exited with code 1"),
            id="waiting: the last READY report is about a daemon that is gone",
        ),
        pytest.param(
            ControlState(phase=Phase.RUNNING, clique=CLIQUE),
            event(),
            RUNNING_READY,
            id="running and READY",
        ),
        pytest.param(
            ControlState(phase=Phase.RUNNING, clique=CLIQUE),
            event(state="INITIALIZING"),
            ImexReadiness(phase=Phase.RUNNING, clique=CLIQUE, daemon_state="INITIALIZING"),
            id="running, not READY yet",
        ),
        pytest.param(
            ControlState(phase=Phase.RUNNING, clique=CLIQUE, restarts=3),
            event(restarts=2),
            ImexReadiness(
                phase=Phase.RUNNING,
                clique=CLIQUE,
                daemon_state=UNKNOWN,
                detail="nvidia-imex-ctl has not reported on the daemon since it started",
            ),
            id="restarted: the READY report is about the previous daemon",
        ),
        pytest.param(
            ControlState(phase=Phase.RUNNING, clique=CLIQUE),
            event(clique=OTHER),
            ImexReadiness(
                phase=Phase.RUNNING,
                clique=CLIQUE,
                daemon_state=UNKNOWN,
                detail="nvidia-imex-ctl has not reported on the daemon since it started",
            ),
            id="the report is about the daemon of another clique",
        ),
        pytest.param(
            ControlState(phase=Phase.RUNNING, clique=CLIQUE),
            None,
            ImexReadiness(
                phase=Phase.RUNNING,
                clique=CLIQUE,
                daemon_state=UNKNOWN,
                detail="nvidia-imex-ctl has not reported on the daemon since it started",
            ),
            id="started, not asked yet",
        ),
    ],
)
def test_readiness_of(
    control: ControlState, last: NodeImexState | None, expected: ImexReadiness
) -> None:
    assert readiness_of(control, last) == expected


# -- imex_refusal: the decision -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("readiness", "clique", "expected"),
    [
        pytest.param(RUNNING_READY, CLIQUE, None, id="READY for the slice's clique"),
        pytest.param(RUNNING_READY, None, None, id="READY, a grant without a seat"),
        pytest.param(
            RUNNING_READY,
            OTHER,
            f"nvidia-imex serves clique {CLIQUE!r}, but the claim's slice is in clique {OTHER!r}",
            id="READY for another clique",
        ),
        pytest.param(
            WAITING,
            CLIQUE,
            "nvidia-imex is not running (phase Waiting: exited with code -9; restarting in 3.0 s)",
            id="waiting to restart",
        ),
        pytest.param(
            ImexReadiness(phase=Phase.NO_CLIQUE, detail="NVML: GPU lost"),
            CLIQUE,
            "the node has no NVLink clique (phase NoClique: NVML: GPU lost)",
            id="no clique",
        ),
        pytest.param(
            ImexReadiness(phase=Phase.NOT_IN_ROSTER, clique=CLIQUE, detail="slot 3 is held by n7"),
            CLIQUE,
            f"the node is not a member of clique {CLIQUE} "
            "(phase NotInRoster: slot 3 is held by n7)",
            id="not in the roster",
        ),
        pytest.param(
            ImexReadiness(phase=Phase.FOREIGN, clique=CLIQUE, detail="ports 50000 answer"),
            CLIQUE,
            "another IMEX daemon holds this node's IMEX ports (phase Foreign: ports 50000 answer)",
            id="a foreign daemon",
        ),
        pytest.param(
            ImexReadiness(phase=Phase.PROGRAMS_MISSING, clique=CLIQUE, detail="nvidia-imex"),
            CLIQUE,
            "the IMEX programs are missing on this node (phase ProgramsMissing: nvidia-imex)",
            id="no IMEX programs",
        ),
        pytest.param(
            ImexReadiness(phase=Phase.RUNNING, clique=CLIQUE, daemon_state="INITIALIZING"),
            CLIQUE,
            "nvidia-imex-ctl reports INITIALIZING, not READY (phase Running)",
            id="running, not READY",
        ),
        pytest.param(
            ImexReadiness(phase=Phase.RUNNING, clique=CLIQUE, daemon_state=NOT_RUNNING),
            None,
            "nvidia-imex-ctl reports NOT_RUNNING, not READY (phase Running)",
            id="running, not reported yet, any clique",
        ),
    ],
)
def test_imex_refusal(readiness: ImexReadiness, clique: str | None, expected: str | None) -> None:
    assert imex_refusal(readiness, clique=clique) == expected


def test_the_error_names_the_node_the_wait_and_the_reason_and_says_it_is_retriable() -> None:
    message = not_ready_message(node="n1", reason="nvidia-imex is not running", waited_s=39.96)
    assert message == (
        "IMEX is not ready on node n1 (waited 40.0 s): nvidia-imex is not running; retriable: "
        "the claim gets its channel once the node's IMEX daemon is READY"
    )


# -- the signal --------------------------------------------------------------------------------


async def test_changed_returns_at_the_next_notify_only() -> None:
    signal = ReadinessSignal(lambda: RUNNING_READY)
    signal.notify()  # nobody waits: nothing is left set for later waiters
    waiter = asyncio.create_task(signal.changed())
    await asyncio.sleep(0)
    assert not waiter.done()
    signal.notify()
    await asyncio.wait_for(waiter, timeout=5)
    assert signal.readiness() == RUNNING_READY


# -- the driver ---------------------------------------------------------------------------------


class FixedResolver:
    """Answers every claim with one grant in ``clique``; counts how often it was asked."""

    def __init__(self, clique: str = CLIQUE) -> None:
        self.clique = clique
        self.calls = 0

    async def resolve(self, claim: Claim) -> Resolution:
        self.calls += 1
        seat = SliceSeat(clique=self.clique, index=0, size=1, rank=0, slice_rank=0)
        grant = ChannelGrant(
            claim_uid=claim.uid,
            domain_namespace=claim.namespace,
            domain_name="train",
            domain_uid="d-1",
            channel=7,
            seat=seat,
        )
        device = DeviceRecord(request="channel", pool="n1", device="attach-0")
        return Resolution(grant=grant, devices=(device,))


class SetReadiness:
    """A readiness source the test sets; ``waiting`` is set once prepare waits on it."""

    def __init__(self, readiness: ImexReadiness) -> None:
        self.current = readiness
        self.waiting = asyncio.Event()
        self._signal = ReadinessSignal(lambda: self.current)

    def readiness(self) -> ImexReadiness:
        return self._signal.readiness()

    async def changed(self) -> None:
        self.waiting.set()
        await self._signal.changed()

    def set(self, readiness: ImexReadiness) -> None:
        self.current = readiness
        self._signal.notify()


class Driver:
    def __init__(self, root: Path, readiness: ImexReadiness, *, wait_s: float) -> None:
        self.root = root
        self.metrics = Metrics()
        self.resolver = FixedResolver()
        self.readiness = SetReadiness(readiness)
        self.driver = ChannelDriver(
            node="n1",
            resolver=self.resolver,
            checkpoint=CheckpointStore(root / "checkpoint.json"),
            devices=ChannelDevices(root=root / "dev", major=234, mode="placeholder"),
            cdi=CdiStore(root / "cdi"),
            metrics=AgentMetrics(self.metrics),
            readiness=self.readiness,
            ready_wait_s=wait_s,
        )
        self.driver.recover()

    def requests(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "cdo_dra_requests_total", {"operation": "prepare", "result": result}
        )
        return value or 0.0

    def files(self) -> list[str]:
        return sorted(p.name for d in ("dev", "cdi") for p in (self.root / d).glob("*"))


async def test_prepare_while_imex_is_down_fails_the_claim_clearly(tmp_path: Path) -> None:
    made = Driver(tmp_path, WAITING, wait_s=0.05)
    result = (await made.driver.prepare([CLAIM]))[CLAIM.uid]
    assert not result.ok
    assert result.error.startswith("IMEX is not ready on node n1 (waited 0.")
    assert "nvidia-imex is not running (phase Waiting: exited with code -9" in result.error
    assert "retriable" in result.error
    assert made.requests("imex_not_ready") == 1
    assert made.requests("refused") == made.requests("ok") == 0
    assert made.driver.data.claims == {}
    assert made.files() == []


async def test_a_zero_wait_answers_at_once(tmp_path: Path) -> None:
    made = Driver(tmp_path, WAITING, wait_s=0)
    result = (await made.driver.prepare([CLAIM]))[CLAIM.uid]
    assert "(waited 0.0 s)" in result.error
    assert not made.readiness.waiting.is_set()


async def test_prepare_waits_for_imex_and_resolves_the_claim_again(tmp_path: Path) -> None:
    made = Driver(tmp_path, WAITING, wait_s=30)
    task = asyncio.create_task(made.driver.prepare([CLAIM]))
    await asyncio.wait_for(made.readiness.waiting.wait(), timeout=5)
    made.readiness.waiting.clear()
    made.readiness.set(ImexReadiness(phase=Phase.RUNNING, clique=CLIQUE, daemon_state="STARTING"))
    await asyncio.wait_for(made.readiness.waiting.wait(), timeout=5)  # a change, still not READY
    assert not task.done()
    made.readiness.set(RUNNING_READY)
    result = (await asyncio.wait_for(task, timeout=5))[CLAIM.uid]
    assert result.ok, result.error
    assert made.resolver.calls == 2  # read again after the wait
    assert made.requests("ok") == 1
    assert made.requests("imex_not_ready") == 0
    assert CLAIM.uid in made.driver.data.claims


async def test_ready_imex_prepares_without_waiting(tmp_path: Path) -> None:
    made = Driver(tmp_path, RUNNING_READY, wait_s=30)
    result = (await asyncio.wait_for(made.driver.prepare([CLAIM]), timeout=5))[CLAIM.uid]
    assert result.ok, result.error
    assert made.resolver.calls == 1
    assert not made.readiness.waiting.is_set()


async def test_imex_ready_for_another_clique_is_not_ready_for_the_claim(tmp_path: Path) -> None:
    made = Driver(tmp_path, RUNNING_READY, wait_s=0.05)
    made.resolver.clique = OTHER
    result = (await made.driver.prepare([CLAIM]))[CLAIM.uid]
    assert f"nvidia-imex serves clique {CLIQUE!r}" in result.error
    assert made.requests("imex_not_ready") == 1


async def test_a_prepared_claim_answers_from_the_checkpoint_while_imex_is_down(
    tmp_path: Path,
) -> None:
    made = Driver(tmp_path, RUNNING_READY, wait_s=30)
    first = await made.driver.prepare([CLAIM])
    made.readiness.set(WAITING)
    again = await asyncio.wait_for(made.driver.prepare([CLAIM]), timeout=5)
    assert again == first
    assert again[CLAIM.uid].ok
    assert made.resolver.calls == 1
    assert not made.readiness.waiting.is_set()


async def test_a_refused_claim_is_refused_before_any_wait(tmp_path: Path) -> None:
    made = Driver(tmp_path, WAITING, wait_s=30)

    async def refuse(claim: Claim) -> Resolution:
        raise ClaimRefusedError("ComputeDomain ml/train has no Placement yet (not placed)")

    made.resolver.resolve = refuse  # type: ignore[method-assign]
    result = (await asyncio.wait_for(made.driver.prepare([CLAIM]), timeout=5))[CLAIM.uid]
    assert result.error == "ComputeDomain ml/train has no Placement yet (not placed)"
    assert made.requests("refused") == 1
    assert not made.readiness.waiting.is_set()


async def test_a_waiting_prepare_holds_back_no_unprepare(tmp_path: Path) -> None:
    made = Driver(tmp_path, RUNNING_READY, wait_s=30)
    assert (await made.driver.prepare([CLAIM]))[CLAIM.uid].ok
    made.readiness.set(WAITING)
    other = Claim(namespace="ml", uid="c-2", name="train-1-channel")
    waiting = asyncio.create_task(made.driver.prepare([other]))
    await asyncio.wait_for(made.readiness.waiting.wait(), timeout=5)
    unprepared = await asyncio.wait_for(made.driver.unprepare([CLAIM]), timeout=5)
    assert unprepared[CLAIM.uid].ok
    assert not waiting.done()
    assert made.files() == []
    made.readiness.set(RUNNING_READY)
    assert (await asyncio.wait_for(waiting, timeout=5))[other.uid].ok
