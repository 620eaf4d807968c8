"""StatefulSets against the emulator: ordinal names and labels, scaling, replacement, claims."""

from __future__ import annotations

import pytest

from sim.controllers.pods import is_active
from sim.controllers.statefulset import POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL
from tests.integration.controllers.cluster import Cluster, pod_template
from tests.integration.controllers.workloads import (
    create_stateful_set,
    scale_stateful_set,
    stateful_set,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")


async def names_of(cluster: Cluster, name: str) -> list[str]:
    sts = await stateful_set(cluster, name)
    assert sts is not None
    return sorted(p.metadata.name for p in await cluster.active_pods_of(sts))


async def test_pods_are_named_and_labelled_by_ordinal_and_scale_from_the_top(
    cluster: Cluster,
) -> None:
    sts = await create_stateful_set(cluster, "db", replicas=3)
    wanted = ["db-0", "db-1", "db-2"]

    async def three() -> bool:
        return await names_of(cluster, "db") == wanted

    await wait_for(three, what="db-0..2")
    for pod in await cluster.pods_of(sts):
        ordinal = pod.metadata.name.rsplit("-", 1)[1]
        assert pod.metadata.labels[POD_INDEX_LABEL] == ordinal
        assert pod.metadata.labels[POD_NAME_LABEL] == pod.metadata.name
        assert pod.metadata.labels[REVISION_LABEL].startswith("db-")
        assert pod.metadata.labels["app"] == "db"
    await cluster.run_pods()

    async def ready() -> bool:
        found = await stateful_set(cluster, "db")
        assert found is not None
        status = found.status
        return (status.replicas, status.ready_replicas, status.available_replicas) == (3, 3, 3)

    await wait_for(ready, what="three ready replicas")
    found = await stateful_set(cluster, "db")
    assert found is not None
    assert found.status.current_replicas == 3
    assert found.status.observed_generation == found.metadata.generation

    await scale_stateful_set(cluster, "db", 5)

    async def five() -> bool:
        return await names_of(cluster, "db") == [f"db-{i}" for i in range(5)]

    await wait_for(five, what="db-0..4")
    await scale_stateful_set(cluster, "db", 2)

    async def two() -> bool:
        return await names_of(cluster, "db") == ["db-0", "db-1"]

    await wait_for(two, what="the highest ordinals gone")


async def test_ordered_ready_starts_one_pod_after_the_other(cluster: Cluster) -> None:
    await create_stateful_set(cluster, "zk", replicas=3, parallel=False)

    async def first() -> bool:
        return await names_of(cluster, "zk") == ["zk-0"]

    await wait_for(first, what="zk-0 alone")
    # zk-1 waits for zk-0 to be Running and Ready: the API must still show zk-0 alone.
    assert await cluster.pod("zk-1") is None
    await cluster.run_pods()

    async def second() -> bool:
        return await names_of(cluster, "zk") == ["zk-0", "zk-1"]

    await wait_for(second, what="zk-1 after zk-0 is ready")
    assert await cluster.pod("zk-2") is None
    await cluster.run_pods()

    async def all_three() -> bool:
        return await names_of(cluster, "zk") == ["zk-0", "zk-1", "zk-2"]

    await wait_for(all_three, what="zk-2 after zk-1 is ready")


async def test_deleted_and_failed_pods_come_back_under_their_name(cluster: Cluster) -> None:
    await create_stateful_set(cluster, "web", replicas=2)

    async def two() -> bool:
        return await names_of(cluster, "web") == ["web-0", "web-1"]

    await wait_for(two, what="web-0 and web-1")
    first = await cluster.pod("web-0")
    second = await cluster.pod("web-1")
    assert first is not None and second is not None
    await cluster.delete_pod(first)
    await cluster.set_phase(second, "Failed")

    async def replaced() -> bool:
        new_first = await cluster.pod("web-0")
        new_second = await cluster.pod("web-1")
        return (
            new_first is not None
            and new_second is not None
            and is_active(new_first)
            and is_active(new_second)
            and new_first.metadata.uid != first.metadata.uid
            and new_second.metadata.uid != second.metadata.uid
        )

    await wait_for(replaced, what="both pods made again")


async def test_each_pod_gets_claims_from_the_templates(cluster: Cluster) -> None:
    await cluster.create_claim_template("imex", labels={"cdo.dev/compute-domain": "d1"})
    template = pod_template(
        claims=[{"name": "imex", "resourceClaimTemplateName": "imex"}], app="gang"
    )
    await create_stateful_set(cluster, "gang", replicas=2, template=template)

    async def claimed() -> dict[str, str] | None:
        found: dict[str, str] = {}
        for name in ("gang-0", "gang-1"):
            pod = await cluster.pod(name)
            if pod is None or not pod.status.resource_claim_statuses:
                return None
            claim = pod.status.resource_claim_statuses[0].resource_claim_name
            assert claim is not None
            found[name] = claim
        return found

    claims = await wait_for(claimed, what="a claim per pod")
    assert claims["gang-0"] != claims["gang-1"]
    for pod_name, claim_name in claims.items():
        claim = await cluster.claim(claim_name)
        assert claim is not None
        assert claim.metadata.labels["cdo.dev/compute-domain"] == "d1"
        owner = claim.metadata.owner_references[0]
        assert (owner.kind, owner.name) == ("Pod", pod_name)
