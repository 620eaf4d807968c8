"""Which domains each change concerns, and which changes move capacity
(services/clique_allocator/routing.py)."""

from __future__ import annotations

import msgspec

from services.clique_allocator.routing import (
    NOTHING,
    Routed,
    domain_changed,
    node_changed,
    placement_changed,
    pod_changed,
    workload_changed,
)
from shared.crds.placement import Placement
from shared.kube.keys import ObjectKey
from shared.kube.models import Pod

from .builders import domain, node, pod, record, workload

TRAIN = ObjectKey(namespace="default", name="train")


def domains_of(found: Pod) -> list[ObjectKey]:
    return [TRAIN] if found.spec.resource_claims else []


def never_recorded(found: Pod) -> bool:
    return False


def test_a_domain_routes_to_itself() -> None:
    assert domain_changed(None, domain()) == [TRAIN]
    assert domain_changed(domain(), None) == [TRAIN]


def test_a_placement_routes_only_when_the_change_is_not_ours() -> None:
    body = {
        "metadata": {"name": "train", "namespace": "default", "uid": "u1", "resourceVersion": "1"},
        "spec": msgspec.to_builtins(record(("a-n00", 1, ()))),
    }
    placement = msgspec.convert(body, type=Placement)
    assert placement_changed(None, placement, ours=True) == NOTHING
    routed = placement_changed(placement, None, ours=False)
    assert routed == Routed(keys=(TRAIN,), capacity=True)


def test_a_pod_routes_when_its_facts_change() -> None:
    gated = pod("p0")
    assert pod_changed(None, gated, domains_of=domains_of, recorded=never_recorded).keys == (TRAIN,)
    same = pod("p0")
    assert pod_changed(gated, same, domains_of=domains_of, recorded=never_recorded) == NOTHING
    pinned = pod("p0", pinned_to="a-n00")
    routed = pod_changed(gated, pinned, domains_of=domains_of, recorded=never_recorded)
    assert routed == Routed(keys=(TRAIN,))


def test_a_pod_outside_every_placement_moves_capacity() -> None:
    foreign = pod("x", template=None, gated=False, node_name="a-n00", phase="Running")
    assert pod_changed(None, foreign, domains_of=domains_of, recorded=never_recorded) == Routed(
        capacity=False, usage=False
    )
    done = pod("x", template=None, gated=False, node_name="a-n00", phase="Succeeded")
    routed = pod_changed(foreign, done, domains_of=domains_of, recorded=never_recorded)
    assert routed == Routed(capacity=True, usage=True)
    # The same pod named in a Placement: its GPUs are the Placement's, capacity is unchanged.
    routed = pod_changed(foreign, done, domains_of=domains_of, recorded=lambda _pod: True)
    assert routed.capacity is None


def test_a_pod_without_gpus_moves_only_what_nodes_hold_for_other_pods() -> None:
    cpu_only = pod("x", template=None, gated=False, node_name="a-n00", phase="Running", gpus=0)
    bound = pod_changed(None, cpu_only, domains_of=domains_of, recorded=never_recorded)
    assert bound == Routed(usage=False)
    gone = pod_changed(cpu_only, None, domains_of=domains_of, recorded=never_recorded)
    assert gone == Routed(usage=True)


def test_a_node_routes_on_facts_not_heartbeats() -> None:
    def placed_on(name: str) -> list[ObjectKey]:
        return [TRAIN] if name == "a-n00" else []

    healthy = node("a-n00")
    assert node_changed(healthy, node("a-n00"), placed_on=placed_on) == NOTHING
    assert node_changed(None, healthy, placed_on=placed_on) == Routed(keys=(TRAIN,), capacity=True)
    sick = node("a-n00", ready="False")
    assert node_changed(healthy, sick, placed_on=placed_on) == Routed(keys=(TRAIN,), capacity=True)
    assert node_changed(healthy, None, placed_on=placed_on) == Routed(keys=(TRAIN,), capacity=False)
    # A node without a clique takes no part in placement: nothing to route.
    assert node_changed(None, node("cpu", clique=None), placed_on=placed_on) == NOTHING


def test_a_workload_routes_when_its_size_changes() -> None:
    def owned_by(uid: str) -> list[ObjectKey]:
        return [TRAIN] if uid == "rs-uid" else []

    two, three = workload(replicas=2), workload(replicas=3)
    assert (
        workload_changed("ReplicaSet", two, workload(replicas=2), domains_owned_by=owned_by) == []
    )
    assert workload_changed("ReplicaSet", two, three, domains_owned_by=owned_by) == [TRAIN]
    assert workload_changed("ReplicaSet", None, two, domains_owned_by=owned_by) == [TRAIN]
