"""The seed manifests on the whole system, applied unchanged with kubectl: the domain becomes
Ready with its 18 pods in one clique and its channel on every member, scales 18 -> 9 -> 18 in
the same clique and channel, and deleting it leaves nothing behind. The seed's shape doubled
(36 pods of 4 GPUs, both racks) is one domain in two slices."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.e2e import scenarios
from tests.e2e.scenarios import (
    SEED,
    apply_seed,
    cliques_of,
    wait_channel_only_on,
)
from tests.e2e.scenarios import (
    SEED_DEPLOYMENT as DEPLOYMENT,
)
from tests.e2e.scenarios import (
    SEED_DOMAIN as DOMAIN,
)
from tests.e2e.scenarios import (
    SEED_SELECTOR as SELECTOR,
)
from tests.e2e.whole_system import (
    GPUS_PER_NODE,
    NODES_PER_CLIQUE,
    WholeSystem,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


async def test_the_seed_applied_unchanged_is_ready_in_one_clique(system: WholeSystem) -> None:
    await scenarios.seed_ready_in_one_clique(system, "seed")


async def test_scaling_18_to_9_to_18_keeps_the_clique_and_the_channel(
    system: WholeSystem,
) -> None:
    await apply_seed(system, "elastic")
    full = await system.wait_domain_ready("elastic", DOMAIN, nodes=18)
    clique, channel = full.status.clique, full.status.channel
    assert clique is not None and channel is not None

    await system.scale("elastic", DEPLOYMENT, 9)
    half = await system.wait_running("elastic", SELECTOR, 9)
    shrunk = await system.wait_domain_ready("elastic", DOMAIN, nodes=9)
    assert await cliques_of(system, half) == {clique}
    assert (shrunk.status.clique, shrunk.status.channel) == (clique, channel)

    async def released() -> bool:
        placement = await system.placement("elastic", DOMAIN)
        return placement is not None and placement.spec.reserved_pods == 9

    await wait_for(released, timeout=60, interval=0.2, what="the reservation shrunk to 9 pods")
    await wait_channel_only_on(system, channel, {pod.spec.node_name for pod in half})

    await system.scale("elastic", DEPLOYMENT, 18)
    again = await system.wait_running("elastic", SELECTOR, 18)
    regrown = await system.wait_domain_ready("elastic", DOMAIN, nodes=18)
    assert await cliques_of(system, again) == {clique}
    assert (regrown.status.clique, regrown.status.channel) == (clique, channel)
    await wait_channel_only_on(system, channel, {pod.spec.node_name for pod in again})
    await system.clean_up("elastic")


async def test_the_seed_doubled_is_one_domain_in_two_slices_one_per_rack(
    system: WholeSystem,
) -> None:
    await scenarios.doubled_in_two_slices(system, "doubled")


async def test_deleting_the_seed_leaves_nothing_behind(system: WholeSystem) -> None:
    await apply_seed(system, "doomed")
    domain = await system.wait_domain_ready("doomed", DOMAIN, nodes=18)
    assert domain.status.channel is not None
    assert await system.all_channel_devices()

    await system.kubectl("delete", "-n", "doomed", *SEED, "--wait=false")
    await system.clean_up("doomed")

    async def nothing_left() -> list[str] | None:
        left = await system.leftovers()
        return None if left else ["clean"]

    try:
        await wait_for(nothing_left, timeout=60, interval=0.3, what="nothing left")
    except AssertionError:
        pytest.fail(f"left behind: {await system.leftovers()}")

    async def all_free() -> dict[str, dict[str, object]] | None:
        capacity = await system.capacity()
        free = all(
            entry["gpus_free"] == NODES_PER_CLIQUE * GPUS_PER_NODE and entry["domains"] == 0
            for entry in capacity.values()
        )
        return capacity if free and len(capacity) == 2 else None

    await wait_for(all_free, timeout=60, interval=0.5, what="every clique's 72 GPUs free")
