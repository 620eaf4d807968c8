"""Status, membership events and KV snapshots follow each real change exactly once."""

from __future__ import annotations

from shared.crds import COMPUTE_DOMAINS, ComputeDomain
from tests.support.wait import wait_for

from .cluster import CLIQUE, NAMESPACE, Cluster, MembershipLog
from .conftest import Controller, step


async def nothing_new(controller: Controller, membership: MembershipLog, name: str) -> None:
    count = len(membership.of(name))
    await controller.wait_idle()
    assert len(membership.of(name)) == count, membership.phases(name)


async def test_each_real_change_is_published_once(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    domain = await cluster.create_domain("train", "train-rct")
    pending = await step(controller, membership, "train", before=0, phase="Pending")
    assert (pending.uid, pending.size, pending.members) == (domain.metadata.uid, 0, ())

    # The workload's pods run already; until the allocator places them nothing changes.
    await cluster.create_node("n1", address="10.0.0.1")
    await cluster.create_node("n2", address="10.0.0.2")
    for pod, node in [("train-0", "n1"), ("train-1", "n1"), ("train-2", "n2")]:
        await cluster.create_pod(pod, "train-rct", node=node)
        await cluster.set_phase(pod, "Running")
    await nothing_new(controller, membership, "train")

    await cluster.place(domain, [("n1", ["train-0", "train-1"]), ("n2", ["train-2"])])
    ready = await step(controller, membership, "train", before=1, phase="Ready")
    assert (ready.clique, ready.channel, ready.size, ready.reason) == (
        CLIQUE,
        3,
        3,
        "AllMembersReady",
    )
    assert [(m.node, m.index, m.address, m.pods, m.status) for m in ready.members] == [
        ("n1", 0, "10.0.0.1", 2, "Ready"),
        ("n2", 1, "10.0.0.2", 1, "Ready"),
    ]
    assert {m.clique for m in ready.members} == {CLIQUE}
    assert [(s.index, s.clique, s.channel, s.size, s.running) for s in ready.slices] == [
        (0, CLIQUE, 3, 3, 3)
    ]

    # Not changes: a label on the domain, an IMEX heartbeat, an unrelated node.
    await cluster.client.patch(
        COMPUTE_DOMAINS, "train", {"metadata": {"labels": {"team": "a"}}}, namespace=NAMESPACE
    )
    await cluster.report_imex("n1", "True")
    await cluster.create_node("n9", address="10.0.0.9")
    await nothing_new(controller, membership, "train")

    await cluster.taint("n2", fault=True)
    degraded = await step(controller, membership, "train", before=2, phase="Degraded")
    assert degraded.reason == "NodeFault"
    assert [m.status for m in degraded.members] == ["Ready", "NotReady"]
    condition = await cluster.condition("train", "Degraded")
    assert condition is not None and condition.status == "True"
    assert "n2" in condition.message

    await cluster.taint("n2", fault=False)
    await step(controller, membership, "train", before=3, phase="Ready")

    await cluster.report_imex("n1", "False", reason="WaitingForPeers")
    imex = await step(controller, membership, "train", before=4, phase="Degraded")
    assert imex.reason == "ImexNotReady"
    await cluster.report_imex("n1", "True")
    await step(controller, membership, "train", before=5, phase="Ready")

    await cluster.set_phase("train-2", "Failed")
    failed = await step(controller, membership, "train", before=6, phase="Placed")
    assert failed.reason == "PodsNotRunning"

    current = await cluster.domain("train")
    assert current is not None and current.status.status == "NotReady"
    reasons = [e.reason for e in await cluster.events("train")]
    for reason in ("Placed", "Ready", "Degraded", "Recovered", "NotReady"):
        assert reason in reasons, reasons


async def test_status_is_written_only_when_it_changes(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    await cluster.create_domain("quiet", "quiet-rct")
    await wait_for(lambda: membership.of("quiet"), what="first event")
    await controller.wait_idle()
    before = await cluster.domain("quiet")
    assert before is not None

    async def reconciles() -> float:
        return await controller.counter(
            "controller_runtime_reconcile_total", controller="computedomains"
        )

    for value in ("a", "b", "c"):  # each queues the domain; none changes its status
        seen = await reconciles()
        await cluster.client.patch(
            COMPUTE_DOMAINS, "quiet", {"metadata": {"labels": {"x": value}}}, namespace=NAMESPACE
        )
        # One patch at a time: the queue folds changes that arrive while the key waits.

        async def looked(seen: float = seen) -> bool:
            return await reconciles() > seen

        await wait_for(looked, what=f"a reconcile after label {value}")
    await controller.wait_idle()
    after = await cluster.domain("quiet")
    assert after is not None and after.status == before.status
    assert await reconciles() >= 4  # it did look each time


async def test_spec_change_is_observed(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    domain: ComputeDomain = await cluster.create_domain("grow", "grow-rct", gang={"size": 4})
    first = await wait_for(lambda: membership.of("grow"), what="first event")
    assert first[0].size == 4 and first[0].generation == domain.metadata.generation
    await cluster.client.patch(
        COMPUTE_DOMAINS, "grow", {"spec": {"gang": {"size": 8}}}, namespace=NAMESPACE
    )
    grown = await wait_for(
        lambda: [e for e in membership.of("grow") if e.size == 8], what="event with new size"
    )
    current = await cluster.domain("grow")
    assert current is not None
    assert grown[0].generation == current.metadata.generation == 2
    assert current.status.observed_generation == 2
    assert all(c.observed_generation == 2 for c in current.status.conditions)
