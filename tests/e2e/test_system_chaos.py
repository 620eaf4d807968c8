"""Chaos on the whole system, two runs on one system.

Kills: small domains are created and deleted in cycles while the domain controller, the clique
allocator and the node host are SIGKILLed at random moments and come back. Afterwards every
remaining domain is Ready, no node's GPUs and no clique's channel are booked twice, and nothing of
a deleted domain is left. The control plane restarts its two services itself, as the kubelet
would; the node host is started again here with the command line and environment it had.

Outages: domains are created and deleted in cycles while, one after the other and through the
``cdo sim`` commands an operator uses, a node's clock runs 30 s ahead, the API server is killed
and restarted on its port, the clique allocator is frozen (SIGSTOP) until its Lease expired and
thawed, the node's clock runs 30 s behind, and NATS is down long enough for every service to
reach its longest reconnect pause. Afterwards every live domain is Ready within a bound, nothing
was booked twice at any moment, the restarts are counted, no pod of no domain was refused at any
moment, and the stream holds the Ready events of the domains that became Ready while NATS was
down.

The random choices come from one seed, printed first (set ``CDO_E2E_CHAOS_SEED`` to replay one).
The default runs are sized for CI; the long ones are marked ``long`` and run only with
``CDO_E2E_LONG=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import msgspec
import pytest
import pytest_asyncio

from bench._e2e_outage import OTHER_TEMPLATE, other_driver_pod, other_driver_template
from shared.bus.cloudevents import decode
from shared.crds import COMPUTE_DOMAINS
from shared.crds.names import DOMAIN_LABEL
from shared.errors import EventError
from shared.events import DomainMembershipChanged
from shared.kube.errors import KubeApiError
from shared.kube.leader import Lease
from shared.kube.resources import (
    DEPLOYMENTS,
    LEASES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    Resource,
)
from sim.control.freeze import frozen
from sim.control.state import read_controlplane
from tests.e2e import contract
from tests.e2e.whole_system import (
    CLIQUE_ALLOCATOR,
    DOMAIN_CONTROLLER,
    GPUS_PER_NODE,
    SYSTEM_STEP_S,
    WholeSystem,
    alive,
    deployment_object,
    domain_object,
    gpus_per_node,
    reserved_per_node,
    running_whole_system,
    shared_channels,
)
from tests.support.wait import wait_for

T = TypeVar("T")

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

NAMESPACE = "chaos"
LONG_ENV = "CDO_E2E_LONG"
SEED_ENV = "CDO_E2E_CHAOS_SEED"
MAX_LIVE = 4
"""Domains alive at once: with at most 4 pods of 2 GPUs each they never fill a clique."""
NODE_HOST = "node-host"
MODULES = {
    DOMAIN_CONTROLLER: "-m services.domain_controller",
    CLIQUE_ALLOCATOR: "-m services.clique_allocator",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(RECONNECT) as running:
        yield running


@dataclass
class Killer:
    """SIGKILLs one of the services at random moments until stopped."""

    system: WholeSystem
    rng: random.Random
    pause_s: tuple[float, float] = (1.0, 4.0)
    kills: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                # A random moment is the point here, not a wait for some state.
                await asyncio.wait_for(self.stop.wait(), self.rng.uniform(*self.pause_s))
            if self.stop.is_set():
                return
            target = self.rng.choice([DOMAIN_CONTROLLER, CLIQUE_ALLOCATOR, NODE_HOST])
            if target == NODE_HOST:
                await self._kill_node_host()
            else:
                self._kill_service(target)

    def _kill_service(self, name: str) -> None:
        pid = self.system.service_pid(name)
        if not alive(pid, MODULES[name]):
            return  # killed already; its control plane is still starting it again
        os.kill(pid, signal.SIGKILL)
        self.kills.append(name)

    async def _kill_node_host(self) -> None:
        command = self.system.kill_node_host()
        self.kills.append(NODE_HOST)
        pid = self.system.start_node_host(command)
        await wait_for(
            lambda: self.system.node_host_pid() == pid,
            timeout=120,
            interval=0.2,
            what="the node host serving again",
        )


@dataclass
class Cycles:
    """Creates a small domain per cycle and deletes others at random points of their lives."""

    system: WholeSystem
    rng: random.Random
    live: dict[str, int] = field(default_factory=dict)
    """Name -> pods, of the domains not deleted."""
    deleted: list[str] = field(default_factory=list)

    async def run(self, cycles: int) -> None:
        for cycle in range(cycles):
            name = f"chaos-{cycle}"
            replicas, gpus = self.rng.randint(2, 4), self.rng.choice([1, 2])
            await self.system.create_workload(NAMESPACE, name, replicas=replicas, gpus=gpus)
            self.live[name] = replicas
            await asyncio.sleep(self.rng.uniform(0.5, 4.0))  # some point of the domain's life
            if len(self.live) > MAX_LIVE or (len(self.live) > 1 and self.rng.random() < 0.5):
                victim = self.rng.choice(sorted(self.live))
                await self.system.delete_workload(NAMESPACE, victim)
                del self.live[victim]
                self.deleted.append(victim)
            await check_nothing_double_booked(self.system)


async def check_nothing_double_booked(system: WholeSystem) -> None:
    """Holds at every moment, not only once things settle."""
    placements = await system.placements()
    over = {n: g for n, g in reserved_per_node(placements).items() if g > GPUS_PER_NODE}
    assert not over, f"reservations over {GPUS_PER_NODE} GPUs: {over}"
    bound = {n: g for n, g in gpus_per_node(await system.pods()).items() if g > GPUS_PER_NODE}
    assert not bound, f"pods bound over {GPUS_PER_NODE} GPUs: {bound}"
    assert shared_channels(placements) == []


async def check_settled(
    system: WholeSystem, live: dict[str, int], *, namespace: str = NAMESPACE
) -> None:
    """Every live domain Ready with its pods; nothing of a deleted domain anywhere."""
    await system.wait_services_ready()
    for name, replicas in sorted(live.items()):
        await system.wait_running(namespace, f"app={name}", replicas, within_s=180)
        await system.wait_domain_ready(namespace, name, within_s=180)
    await check_nothing_double_booked(system)

    async def only_live() -> bool:
        domains = {d.metadata.name for d in await system.domains(namespace)}
        placements = {p.metadata.name for p in await system.placements(namespace)}
        claims = {c.metadata.labels.get(DOMAIN_LABEL) for c in await system.claims(namespace)}
        templates = {
            t.metadata.name
            for t in await system.templates(namespace)
            if DOMAIN_LABEL in t.metadata.labels
        }
        return (
            domains == placements == set(live)
            and claims <= set(live)
            and templates == {f"{name}-rct" for name in live}
        )

    await wait_for(only_live, timeout=120, interval=0.5, what="only live domains' objects")

    placements = await system.placements(namespace)

    async def devices_of_live_domains_only() -> bool:
        wanted: dict[str, set[int]] = {}
        for placement in placements:
            for piece in placement.spec.all_slices:
                for member in piece.members:
                    wanted.setdefault(member.node, set()).add(piece.channel)
        found = await system.all_channel_devices()
        return all(channels <= wanted.get(node, set()) for node, channels in found.items())

    await wait_for(
        devices_of_live_domains_only,
        timeout=120,
        interval=0.5,
        what="channel devices only of live domains, on their members",
    )


@pytest.mark.parametrize(
    "cycles",
    [
        pytest.param(10, id="ci", marks=pytest.mark.timeout(600)),
        pytest.param(
            50,
            id="long",
            marks=[
                pytest.mark.long,
                pytest.mark.timeout(2400),
                pytest.mark.skipif(
                    os.environ.get(LONG_ENV) != "1", reason=f"long chaos run: set {LONG_ENV}=1"
                ),
            ],
        ),
    ],
)
async def test_domains_survive_services_killed_at_random_moments(
    system: WholeSystem, cycles: int
) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.randrange(2**32))
    print(f"chaos seed {seed} ({SEED_ENV}={seed} replays it), {cycles} cycles")
    with contextlib.suppress(KubeApiError):  # the long run may follow the CI one here
        await system.create_namespace(NAMESPACE)
    killer = Killer(system, random.Random(seed))
    work = Cycles(system, random.Random(seed + 1))
    chaos = asyncio.create_task(killer.run(), name="killer")
    try:
        await work.run(cycles)
    finally:
        killer.stop.set()
        await chaos
    print(f"killed: {killer.kills}; deleted: {work.deleted}; live: {sorted(work.live)}")
    assert killer.kills, "nothing was killed: the run proves nothing"

    await check_settled(system, work.live)
    await system.clean_up(NAMESPACE, within_s=180)

    async def nothing_left() -> bool:
        return not await system.leftovers()

    try:
        await wait_for(nothing_left, timeout=120, interval=0.5, what="nothing left")
    except AssertionError:
        pytest.fail(f"seed {seed}: left behind: {await system.leftovers()}")


# -- outages: NATS, the API server, a frozen leader, skewed clocks ---------------------------

OUTAGES_NAMESPACE = "outages"
NATS_DOWN_S = 8.0
"""How long NATS is down: every service's connect attempts back off to their longest pause
(RECONNECT) and keep failing at it."""
RECONNECT = {"CDO_NATS_RECONNECT_WAIT_S": "0.2", "CDO_NATS_RECONNECT_MAX_WAIT_S": "2"}
READY_AFTER_FAULTS_S = 120.0
"""Every live domain is Ready within this long after the last fault ended."""
SKEWED_NODE = "rack-0-tray05"
ALLOCATOR_LEASE = "cdo-clique-allocator"
LEASE_NAMESPACE = "cdo-system"


async def retrying(act: Callable[[], Awaitable[T]], *, what: str, within_s: float = 60) -> T:
    """``act()`` until the API server answers it: a restart of the API server or a webhook that
    cannot be called for a moment is waited out (bounded), as a controller would."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        try:
            return await act()
        except KubeApiError as exc:
            if not (exc.code == 0 or exc.code >= 500 or exc.code == 429):
                raise
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{what}: still failing after {within_s} s: {exc}") from exc
        await asyncio.sleep(0.5)  # a retry pause, not a wait for a state


async def create_or_keep(system: WholeSystem, resource: Resource, body: dict[str, Any]) -> None:
    """Create, or find it there already (a create retried after its answer was lost)."""
    try:
        await system.client.create(resource, body, namespace=OUTAGES_NAMESPACE)
    except KubeApiError as exc:
        if not exc.already_exists:
            raise


@dataclass
class WorkloadCycles:
    """Domains created and deleted in cycles through every outage, each call retried while the
    API server is away."""

    system: WholeSystem
    rng: random.Random
    live: dict[str, int] = field(default_factory=dict)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    cycles: int = 0

    async def run(self, *, least: int) -> None:
        while self.cycles < least or not self.stop.is_set():
            name = f"out-{self.cycles}"
            replicas = self.rng.randint(2, 3)
            await retrying(partial(self._create, name, replicas), what=f"create {name}")
            self.live[name] = replicas
            self.cycles += 1
            with contextlib.suppress(TimeoutError):
                # A random point of the domain's life (or the end of the run).
                await asyncio.wait_for(self.stop.wait(), self.rng.uniform(1.0, 3.0))
            if len(self.live) > MAX_LIVE:
                victim = self.rng.choice(sorted(self.live))
                delete = partial(self.system.delete_workload, OUTAGES_NAMESPACE, victim)
                await retrying(delete, what=f"delete {victim}")
                del self.live[victim]
            await retrying(
                partial(check_nothing_double_booked, self.system), what="placements and pods"
            )

    async def _create(self, name: str, replicas: int) -> None:
        await create_or_keep(self.system, COMPUTE_DOMAINS, domain_object(name))
        deployment = deployment_object(name, replicas=replicas, gpus=1)
        await create_or_keep(self.system, DEPLOYMENTS, deployment)


@dataclass
class OtherPods:
    """Creates (and deletes) a pod of no ComputeDomain, with a claim of another driver's
    template, once a second through every outage; what cdo's webhook refused is kept."""

    system: WholeSystem
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    admitted: int = 0
    unreachable: int = 0
    refused: list[str] = field(default_factory=list)

    async def run(self) -> None:
        index = 0
        while not self.stop.is_set():
            index += 1
            name = f"other-{index}"
            try:
                pod = other_driver_pod(name, OUTAGES_NAMESPACE)
                await self.system.client.create(PODS, pod, namespace=OUTAGES_NAMESPACE)
            except KubeApiError as exc:
                if exc.code == 0:
                    self.unreachable += 1  # the API server itself is away (its restart)
                else:
                    self.refused.append(f"{name}: {exc}")
            else:
                self.admitted += 1
                with contextlib.suppress(KubeApiError):
                    await self.system.client.delete(PODS, name, namespace=OUTAGES_NAMESPACE)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), 1.0)  # the pace of the probe


def restarts(system: WholeSystem) -> dict[str, int]:
    info = read_controlplane(system.state_dir)
    assert info is not None, "the control plane is not running"
    return {name: service.restarts for name, service in info.services.items()}


async def lease_age_s(system: WholeSystem, name: str) -> tuple[float, float, str]:
    """How long ago the Lease was renewed, its duration and its holder (the services run on
    this machine: one clock)."""
    raw = await system.client.get(LEASES, name, namespace=LEASE_NAMESPACE)
    spec = msgspec.json.decode(raw, type=Lease).spec
    renewed = datetime.fromisoformat(spec.renew_time.replace("Z", "+00:00"))
    age = (datetime.now(UTC) - renewed).total_seconds()
    return age, float(spec.lease_duration_seconds), spec.holder_identity


async def lease_expired(system: WholeSystem, name: str) -> bool:
    """The Lease was last renewed longer ago than its duration (it may be taken over now)."""
    age, duration, _ = await lease_age_s(system, name)
    return age > duration


async def lease_renewed(system: WholeSystem, name: str) -> bool:
    """Someone holds the Lease and renewed it within the last retry period or two."""
    age, _, holder = await lease_age_s(system, name)
    return bool(holder) and age < 1.0


@dataclass
class Outages:
    """The faults, one after the other, each ended before the next begins."""

    system: WholeSystem
    done: list[str] = field(default_factory=list)
    ready_during_nats_outage: set[str] = field(default_factory=set)
    """Domains that became Ready while NATS was down."""

    async def run(self, *, rounds: int) -> None:
        for _ in range(rounds):
            await self._round()

    async def _round(self) -> None:
        system = self.system
        await system.cdo("sim", "clock", SKEWED_NODE, "30")
        self.done.append(f"{SKEWED_NODE} clock 30 s ahead")
        await system.cdo("sim", "restart", "api")
        self.done.append("API server killed and restarted")
        await self._frozen_allocator()
        await system.cdo("sim", "clock", SKEWED_NODE, "-30")
        self.done.append(f"{SKEWED_NODE} clock 30 s behind")
        await self._nats_outage()
        await system.cdo("sim", "clock", SKEWED_NODE, "0")

    async def _frozen_allocator(self) -> None:
        system = self.system
        # Frozen while it leads (not while it starts again after the API server's restart).
        await system.wait_services_ready()
        await wait_for(
            lambda: lease_renewed(system, ALLOCATOR_LEASE),
            timeout=60,
            interval=0.3,
            what="the allocator leading",
        )
        before = restarts(system)[CLIQUE_ALLOCATOR]
        pid = system.service_pid(CLIQUE_ALLOCATOR)
        await system.cdo("sim", "freeze", CLIQUE_ALLOCATOR)
        try:
            await wait_for(
                lambda: lease_expired(system, ALLOCATOR_LEASE),
                timeout=30,
                interval=0.3,
                what="the frozen allocator's Lease expired",
            )
        finally:
            await system.cdo("sim", "thaw", CLIQUE_ALLOCATOR)
        # It wakes past its renew deadline: it steps down and the control plane restarts it.
        try:
            await wait_for(
                lambda: restarts(system)[CLIQUE_ALLOCATOR] > before,
                timeout=60,
                interval=0.3,
                what="the thawed allocator restarted",
            )
        except AssertionError as exc:
            log = system.state_dir / "logs" / f"{CLIQUE_ALLOCATOR}.log"
            state = "frozen" if frozen(pid) else "running" if alive(pid, "allocator") else "gone"
            tail = log.read_text().splitlines()[-15:] if log.exists() else []
            message = f"{exc}; pid {pid} {state}; its log ends:\n" + "\n".join(tail)
            raise AssertionError(message) from None
        self.done.append("clique allocator frozen past its Lease, thawed, restarted")

    async def _nats_outage(self) -> None:
        system = self.system

        async def ready_now() -> set[str]:
            domains = await retrying(partial(system.domains, OUTAGES_NAMESPACE), what="domains")
            return {d.metadata.name for d in domains if d.status.status == "Ready"}

        ready_before = await ready_now()
        await system.cdo("sim", "nats", "stop")
        loop = asyncio.get_running_loop()
        down_until = loop.time() + NATS_DOWN_S
        try:
            # At least NATS_DOWN_S, and until some domain (the cycles create one every few
            # seconds) became Ready meanwhile: the proof that placement did not wait for NATS.
            while loop.time() < down_until or not self.ready_during_nats_outage:
                if loop.time() > down_until + SYSTEM_STEP_S:
                    raise AssertionError("no domain became Ready while NATS was down")
                self.ready_during_nats_outage |= await ready_now() - ready_before
                await asyncio.sleep(0.5)
        finally:
            await system.cdo("sim", "nats", "start")
        self.done.append(f"NATS down for {NATS_DOWN_S:g} s")


async def membership_in_stream(system: WholeSystem) -> dict[str, set[str]]:
    """Each domain of the namespace and the phases its membership events in the stream say."""
    found: dict[str, set[str]] = defaultdict(set)

    def keep(headers: dict[str, str], body: bytes) -> None:
        with contextlib.suppress(EventError):  # the contract check reports those
            event = decode(headers, body)
            if isinstance(event, DomainMembershipChanged) and event.namespace == OUTAGES_NAMESPACE:
                found[event.name].add(event.phase)

    await contract.replay(system.nats_url, token_file=system.nats_token_file, on_message=keep)
    return found


@pytest.mark.parametrize(
    ("cycles", "rounds"),
    [
        pytest.param(6, 1, id="ci", marks=pytest.mark.timeout(600)),
        pytest.param(
            30,
            4,
            id="long",
            marks=[
                pytest.mark.long,
                pytest.mark.timeout(2400),
                pytest.mark.skipif(
                    os.environ.get(LONG_ENV) != "1", reason=f"long outage run: set {LONG_ENV}=1"
                ),
            ],
        ),
    ],
)
async def test_domains_survive_outages_of_the_api_server_a_frozen_leader_and_skewed_clocks(
    system: WholeSystem, cycles: int, rounds: int
) -> None:
    """Domains are created and deleted in cycles while, one after the other (``rounds`` times
    over): a node's clock
    runs 30 s ahead, the API server is killed and restarted on its port, the clique allocator
    is frozen (SIGSTOP) until its Lease has expired and thawed, the node's clock runs 30 s
    behind, NATS is stopped long enough for every service to reach its longest reconnect pause
    and started again. A pod of no domain is created every second throughout. Then every live
    domain is Ready within a bound, nothing was double-booked at any moment, no channel is
    shared, the restarts are counted, and the stream holds the Ready events of the domains
    that became Ready while NATS was down."""
    seed = int(os.environ.get(SEED_ENV) or random.randrange(2**32))
    print(
        f"outage seed {seed} ({SEED_ENV}={seed} replays it), at least {cycles} cycles, "
        f"{rounds} rounds of faults"
    )
    with contextlib.suppress(KubeApiError):
        await system.create_namespace(OUTAGES_NAMESPACE)
    with contextlib.suppress(KubeApiError):
        await system.client.create(
            RESOURCE_CLAIM_TEMPLATES,
            other_driver_template(OUTAGES_NAMESPACE),
            namespace=OUTAGES_NAMESPACE,
        )
    before = restarts(system)
    work = WorkloadCycles(system, random.Random(seed))
    others = OtherPods(system)
    outages = Outages(system)
    loop = asyncio.get_running_loop()
    async with asyncio.TaskGroup() as group:
        group.create_task(others.run(), name="pods of no domain")
        cycling = group.create_task(work.run(least=cycles), name="cycles")
        try:
            await outages.run(rounds=rounds)
        finally:
            work.stop.set()
        faults_ended = loop.time()
        await cycling
        try:
            await wait_for(
                lambda: all_ready(system, work.live),
                timeout=max(0.0, READY_AFTER_FAULTS_S - (loop.time() - faults_ended)),
                interval=0.5,
                what=f"every live domain Ready within {READY_AFTER_FAULTS_S:g} s of the last fault",
            )
        finally:
            others.stop.set()
    took = loop.time() - faults_ended
    after = restarts(system)
    counted = {name: after[name] - before[name] for name in after}
    print(
        f"faults: {outages.done}; {work.cycles} cycles; live {sorted(work.live)}; every domain "
        f"Ready {took:.1f} s after the last fault; restarts during the run {counted}; pods of no "
        f"domain admitted {others.admitted}, refused {len(others.refused)}, API away "
        f"{others.unreachable}"
    )
    assert counted[CLIQUE_ALLOCATOR] >= 1, "the frozen allocator did not restart"
    await check_settled(system, work.live, namespace=OUTAGES_NAMESPACE)
    assert not others.refused, f"pods of no domain refused: {others.refused[:5]}"
    phases = await membership_in_stream(system)
    missing = sorted(
        name for name in outages.ready_during_nats_outage if "Ready" not in phases[name]
    )
    assert not missing, f"Ready while NATS was down, not in the stream: {missing}"
    await system.client.delete(
        RESOURCE_CLAIM_TEMPLATES, OTHER_TEMPLATE, namespace=OUTAGES_NAMESPACE
    )
    await system.clean_up(OUTAGES_NAMESPACE, within_s=180)


async def all_ready(system: WholeSystem, live: dict[str, int]) -> bool:
    for name, replicas in live.items():
        if await system.running(OUTAGES_NAMESPACE, f"app={name}", replicas) is None:
            return False
        domain = await system.domain(OUTAGES_NAMESPACE, name)
        if domain is None or domain.status.status != "Ready":
            return False
    return True
