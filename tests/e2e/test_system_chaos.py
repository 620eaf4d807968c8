"""Chaos on the whole system: small domains are created and deleted in cycles while the domain
controller, the clique allocator and the node host are SIGKILLed at random moments and come
back. Afterwards every remaining domain is Ready, no node's GPUs and no clique's channel are
booked twice, and nothing of a deleted domain is left.

The control plane restarts its two services itself, as the kubelet would; the node host is
started again here with the command line and environment it had. The random choices come from
one seed, printed first (set ``CDO_E2E_CHAOS_SEED`` to replay one). The default run is sized for
CI; the 50-cycle run is marked ``long`` and runs only with ``CDO_E2E_LONG=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio

from shared.crds.names import DOMAIN_LABEL
from shared.kube.errors import KubeApiError
from tests.e2e.whole_system import (
    CLIQUE_ALLOCATOR,
    DOMAIN_CONTROLLER,
    GPUS_PER_NODE,
    WholeSystem,
    alive,
    gpus_per_node,
    reserved_per_node,
    running_whole_system,
    shared_channels,
)
from tests.support.wait import wait_for

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
    async with running_whole_system() as running:
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


async def check_settled(system: WholeSystem, live: dict[str, int]) -> None:
    """Every live domain Ready with its pods; nothing of a deleted domain anywhere."""
    await system.wait_services_ready()
    for name, replicas in sorted(live.items()):
        await system.wait_running(NAMESPACE, f"app={name}", replicas, within_s=180)
        await system.wait_domain_ready(NAMESPACE, name, within_s=180)
    await check_nothing_double_booked(system)

    async def only_live() -> bool:
        domains = {d.metadata.name for d in await system.domains(NAMESPACE)}
        placements = {p.metadata.name for p in await system.placements(NAMESPACE)}
        claims = {c.metadata.labels.get(DOMAIN_LABEL) for c in await system.claims(NAMESPACE)}
        templates = {t.metadata.name for t in await system.templates(NAMESPACE)}
        return (
            domains == placements == set(live)
            and claims <= set(live)
            and templates == {f"{name}-rct" for name in live}
        )

    await wait_for(only_live, timeout=120, interval=0.5, what="only live domains' objects")

    placements = await system.placements(NAMESPACE)

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
