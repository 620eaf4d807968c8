"""Whole scheduling cycles over a ClusterState, with assumptions between them."""

from __future__ import annotations

from collections import Counter

from sim.scheduler.algorithm import Placement, Unschedulable, schedule_pod
from sim.scheduler.cel import SelectorCache
from sim.scheduler.facts import PodFacts
from sim.scheduler.state import ClusterState
from sim.scheduler.writes import reserved
from tests.unit.scheduler.builders import (
    CLIQUE,
    DRIVER,
    cluster,
    device,
    exactly,
    facts,
    make_claim,
    make_class,
    make_node,
    make_pod,
    make_slice,
    pod_affinity,
)

CHANNEL = "compute-domain-channel.cdo.dev"


def two_racks() -> ClusterState:
    nodes = [
        make_node(f"{rack}-{i:02d}", labels={CLIQUE: f"uuid-{rack}.0"})
        for rack in ("a", "b")
        for i in range(18)
    ]
    return cluster(nodes)


def schedule_and_assume(state: ClusterState, pod: PodFacts) -> Placement | Unschedulable:
    decision = schedule_pod(pod, state, cache=SelectorCache())
    if isinstance(decision, Placement):
        state.assume_pod(pod.with_node(decision.node))
        for each in decision.claims:
            state.assume_claim(reserved(each.claim, pod, each.allocation))
    return decision


def test_a_gang_with_clique_affinity_fills_one_clique_and_the_next_pod_is_told_why() -> None:
    state = two_racks()
    group = {"app": "seed"}
    affinity = pod_affinity(key=CLIQUE, labels=group)
    placed: list[str] = []
    for i in range(18):
        pod = facts(make_pod(f"seed-{i}", labels=group, gpus=4, affinity=affinity))
        decision = schedule_and_assume(state, pod)
        assert isinstance(decision, Placement), decision
        placed.append(decision.node)
    assert len(set(placed)) == 18  # one pod per node: each takes all 4 GPUs
    cliques = {state.node(name).labels[CLIQUE] for name in placed}  # type: ignore[union-attr]
    assert len(cliques) == 1
    extra = facts(make_pod("seed-18", labels=group, gpus=4, affinity=affinity))
    decision = schedule_pod(extra, state, cache=SelectorCache())
    assert isinstance(decision, Unschedulable)
    assert decision.message == (
        "0/36 nodes are available: 18 Insufficient nvidia.com/gpu, "
        "18 node(s) didn't match pod affinity rules."
    )
    assert decision.kinds == {"resources", "affinity"}


def test_assumed_pods_hold_their_gpus_before_the_informer_sees_them() -> None:
    state = cluster([make_node("n1", gpus=4)])
    for i in range(4):
        assert isinstance(schedule_and_assume(state, facts(make_pod(f"p{i}", gpus=1))), Placement)
    decision = schedule_and_assume(state, facts(make_pod("p4", gpus=1)))
    assert isinstance(decision, Unschedulable)
    assert decision.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    state.forget_pod("default/p0")
    assert isinstance(schedule_and_assume(state, facts(make_pod("p4", gpus=1))), Placement)


def test_single_gpu_pods_spread_over_nodes() -> None:
    state = cluster([make_node(f"n{i}") for i in range(4)])
    nodes: Counter[str] = Counter()
    for i in range(16):
        decision = schedule_and_assume(state, facts(make_pod(f"p{i}", gpus=1)))
        assert isinstance(decision, Placement)
        nodes[decision.node] += 1
    assert set(nodes.values()) == {4}


def test_mixed_reasons_over_nodes() -> None:
    state = cluster(
        [
            make_node("cordoned", unschedulable=True),
            make_node("faulty", taints=[{"key": "cdo.dev/gpu-fault", "effect": "NoExecute"}]),
            make_node("small", gpus=1, labels={"zone": "a"}),
            make_node("elsewhere", labels={"zone": "b"}),
            make_node("down", ready="False"),
        ]
    )
    anywhere = schedule_pod(facts(make_pod("p", gpus=2)), state, cache=SelectorCache())
    assert isinstance(anywhere, Placement)
    assert anywhere.node == "elsewhere"
    decision = schedule_pod(
        facts(make_pod("p", gpus=2, node_selector={"zone": "a"})), state, cache=SelectorCache()
    )
    assert isinstance(decision, Unschedulable)
    assert decision.message == (
        "0/5 nodes are available: "
        "1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {cdo.dev/gpu-fault: }, "
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) were unschedulable."
    )
    assert decision.kinds == {"node", "resources"}


def dra_cluster() -> ClusterState:
    state = cluster([make_node("n1"), make_node("n2")])
    state.set_device_class(make_class(CHANNEL, f'device.driver == "{DRIVER}"'))
    state.set_slice(make_slice("n1-slots", node_name="n1", devices=[device("slot-0")]))
    return state


def claim_pod(name: str, claim_name: str | None) -> PodFacts:
    statuses = [] if claim_name is None else [{"name": "channel", "resourceClaimName": claim_name}]
    return facts(
        make_pod(
            name,
            claims=[{"name": "channel", "resourceClaimTemplateName": "tmpl"}],
            claim_statuses=statuses,
        )
    )


def test_a_pod_waits_for_its_claim_to_be_created() -> None:
    state = dra_cluster()
    decision = schedule_pod(claim_pod("p", None), state, cache=SelectorCache())
    assert isinstance(decision, Unschedulable)
    assert decision.message == (
        '0/2 nodes are available: waiting for resource claim "channel" to be created.'
    )
    decision = schedule_pod(claim_pod("p", "p-channel"), state, cache=SelectorCache())
    assert isinstance(decision, Unschedulable)
    assert decision.message == '0/2 nodes are available: resourceclaim "p-channel" not found.'
    assert decision.kinds == {"dra"}


def test_a_template_claim_must_belong_to_the_pod() -> None:
    state = dra_cluster()
    state.set_claim(make_claim("p-channel", requests=[exactly("slot", CHANNEL)], owner_uid="other"))
    decision = schedule_pod(claim_pod("p", "p-channel"), state, cache=SelectorCache())
    assert isinstance(decision, Unschedulable)
    assert 'was not created for pod "p"' in decision.message


def test_claims_steer_the_pod_to_the_node_with_a_free_device() -> None:
    state = dra_cluster()
    for name in ("p", "q"):
        state.set_claim(
            make_claim(
                f"{name}-channel", requests=[exactly("slot", CHANNEL)], owner_uid=f"uid-{name}"
            )
        )
    first = schedule_and_assume(state, claim_pod("p", "p-channel"))
    assert isinstance(first, Placement)
    assert first.node == "n1"  # only n1 publishes a slot
    (allocation,) = first.claims
    assert allocation.devices == ((DRIVER, "n1", "slot-0"),)
    claim = state.claim("default", "p-channel")
    assert claim is not None
    assert [r.name for r in claim.status.reserved_for] == ["p"]
    second = schedule_and_assume(state, claim_pod("q", "q-channel"))
    assert isinstance(second, Unschedulable)
    assert second.message == "0/2 nodes are available: 2 cannot allocate all claims."
    assert second.kinds == {"dra"}


def test_a_pod_that_asks_only_for_a_channel_needs_a_free_device_and_no_gpu() -> None:
    """NVIDIA's channel check pinned by the allocator: the node's free GPUs do not matter, its
    free attachment devices do (kube-scheduler's DRA and resource filters, nothing more)."""
    state = cluster([make_node("full", gpus=4), make_node("spare", gpus=4)])
    state.set_device_class(make_class(CHANNEL, f'device.driver == "{DRIVER}"'))
    for node in ("full", "spare"):
        state.set_slice(make_slice(f"{node}-slots", node_name=node, devices=[device("slot-0")]))
    for i in range(4):  # every GPU of "full" taken
        pinned = facts(make_pod(f"w{i}", gpus=1, node_selector={"kubernetes.io/hostname": "full"}))
        assert isinstance(schedule_and_assume(state, pinned), Placement)
    for name in ("smoke", "again"):
        state.set_claim(
            make_claim(
                f"{name}-channel", requests=[exactly("slot", CHANNEL)], owner_uid=f"uid-{name}"
            )
        )

    def pinned_smoke(name: str, node: str) -> PodFacts:
        pod = make_pod(
            name,
            node_selector={"kubernetes.io/hostname": node},
            claims=[{"name": "channel", "resourceClaimTemplateName": "tmpl"}],
            claim_statuses=[{"name": "channel", "resourceClaimName": f"{name}-channel"}],
        )
        return facts(pod)

    first = schedule_and_assume(state, pinned_smoke("smoke", "full"))
    assert isinstance(first, Placement) and first.node == "full"
    second = schedule_and_assume(state, pinned_smoke("again", "full"))
    assert isinstance(second, Unschedulable)
    assert second.message == (
        "0/2 nodes are available: 1 cannot allocate all claims, "
        "1 node(s) didn't match Pod's node affinity/selector."
    )
