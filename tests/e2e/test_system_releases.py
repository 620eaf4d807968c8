"""The whole system at every Kubernetes release cdo supports (1.34 to 1.37, each with its
default gates and APIs: DeviceTaintRule is served only by 1.37): the seed manifests Ready in one
clique, the seed's shape doubled Ready as one domain in two slices, and a fatal XID on a member
handled in the same clique. One system per release; every other end-to-end module runs on the
newest release only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from sim.kubeapi.releases import SUPPORTED_RELEASES
from tests.e2e import scenarios
from tests.e2e.whole_system import WholeSystem, running_whole_system

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

# The faulted node must still be tainted when the replacement is placed.
HEALTH = {"CDO_HEALTH_XID_LATCH_S": "30", "CDO_HEALTH_HOLD_DOWN_S": "5"}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=SUPPORTED_RELEASES)
async def system(request: pytest.FixtureRequest) -> AsyncIterator[WholeSystem]:
    async with running_whole_system(HEALTH, kubernetes_version=request.param) as running:
        yield running


async def test_the_release_is_the_one_asked_for(
    system: WholeSystem, request: pytest.FixtureRequest
) -> None:
    release = request.node.callspec.params["system"]
    assert f"Server Version: v{release}.0" in await system.kubectl("version")
    rules = await system.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name")
    assert ("devicetaintrules.resource.k8s.io" in rules.split()) is (release == "1.37")


async def test_the_seed_is_ready_in_one_clique(system: WholeSystem) -> None:
    await scenarios.seed_ready_in_one_clique(system, "seed")


async def test_a_domain_of_two_slices_is_ready(system: WholeSystem) -> None:
    await scenarios.doubled_in_two_slices(system, "doubled")


async def test_a_fatal_xid_is_handled_in_the_same_clique(system: WholeSystem) -> None:
    outcome = await scenarios.fatal_xid_replaced_in_clique(system, "xid", "small")
    await system.inject_fault(outcome.victim, None)
    await system.clean_up("xid")
