"""ClusterState: usage per node, assumptions and their confirmation, what each change helps."""

from __future__ import annotations

import msgspec

from sim.scheduler.objects import ResourceClaim
from sim.scheduler.state import ALL_KINDS, ClusterState
from tests.unit.scheduler.builders import (
    DRIVER,
    exactly,
    facts,
    make_claim,
    make_node,
    make_pod,
)

GPU_MILLI = 1000


def test_bound_pods_add_up_per_node_and_leave_when_deleted_or_finished() -> None:
    state = ClusterState()
    state.set_node(make_node("n1"))
    state.observe_pod(make_pod("a", gpus=1, node_name="n1"))
    state.observe_pod(make_pod("b", gpus=2, node_name="n1"))
    state.observe_pod(make_pod("pending", gpus=4))
    assert state.usage("n1").requested["nvidia.com/gpu"] == 3 * GPU_MILLI
    assert state.usage("n1").pods == 2
    assert state.delete_pod("default/a") == {"resources", "affinity", "anti-affinity"}
    assert state.observe_pod(make_pod("b", gpus=2, node_name="n1", phase="Succeeded"))
    assert state.usage("n1").pods == 0
    assert state.usage("n1").requested == {}


def test_an_assumed_pod_counts_until_confirmed_or_forgotten() -> None:
    state = ClusterState()
    state.set_node(make_node("n1"))
    pending = make_pod("p", gpus=2)
    state.assume_pod(facts(pending).with_node("n1"))
    assert state.is_assumed("default/p")
    assert state.usage("n1").requested["nvidia.com/gpu"] == 2 * GPU_MILLI
    # a late event that still shows the pod pending does not undo the assumption
    assert state.observe_pod(pending) == frozenset()
    assert state.usage("n1").pods == 1
    # the bind lands: the pod is now known, and pods waiting for company may look again
    assert state.observe_pod(make_pod("p", gpus=2, node_name="n1")) == {"affinity", "anti-affinity"}
    assert not state.is_assumed("default/p")
    state.forget_pod("default/p")  # too late to forget: the informer has seen it bound
    assert state.usage("n1").pods == 1


def test_forgetting_releases_the_assumed_pod() -> None:
    state = ClusterState()
    state.set_node(make_node("n1"))
    state.assume_pod(facts(make_pod("p", gpus=2)).with_node("n1"))
    state.forget_pod("default/p")
    assert state.usage("n1").pods == 0
    assert not state.is_assumed("default/p")


def test_node_heartbeats_change_nothing() -> None:
    state = ClusterState()
    node = make_node("n1")
    assert state.set_node(node) == ALL_KINDS
    assert state.set_node(node) == frozenset()
    assert state.set_node(make_node("n1", labels={"new": "label"})) == ALL_KINDS


def allocated(claim: ResourceClaim, device: str, version: str) -> ResourceClaim:
    with_status = msgspec.convert(
        {
            "metadata": {
                "name": claim.metadata.name,
                "namespace": "default",
                "resourceVersion": version,
            },
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "slot", "driver": DRIVER, "pool": "n1", "device": device}
                        ]
                    }
                }
            },
        },
        ResourceClaim,
    )
    return msgspec.structs.replace(claim, metadata=with_status.metadata, status=with_status.status)


def test_an_assumed_claim_holds_its_devices_until_the_informer_catches_up() -> None:
    state = ClusterState()
    claim = make_claim("c", requests=[exactly("slot", "x")], resource_version="5")
    state.set_claim(claim)
    assert list(state.devices_in_use()) == []
    state.assume_claim(allocated(claim, "slot-0", "5"))
    assert (DRIVER, "n1", "slot-0") in state.devices_in_use()
    state.claim_written(allocated(claim, "slot-0", "7"))
    # an older event (the claim's own earlier version) keeps the assumption
    state.set_claim(claim)
    assert (DRIVER, "n1", "slot-0") in state.devices_in_use()
    the_claim = state.claim("default", "c")
    assert the_claim is not None
    assert the_claim.status.allocation is not None
    # the informer reaches the written version: it now speaks for itself
    state.set_claim(allocated(claim, "slot-0", "7"))
    assert (DRIVER, "n1", "slot-0") in state.devices_in_use()
    state.delete_claim("default/c")
    assert list(state.devices_in_use()) == []


def test_a_forgotten_claim_assumption_frees_its_devices() -> None:
    state = ClusterState()
    claim = make_claim("c", requests=[exactly("slot", "x")])
    state.set_claim(claim)
    state.assume_claim(allocated(claim, "slot-0", "1"))
    state.forget_claim("default/c")
    assert list(state.devices_in_use()) == []
    the_claim = state.claim("default", "c")
    assert the_claim is not None
    assert the_claim.status.allocation is None


def test_only_claim_changes_that_free_something_wake_dra_blocked_pods() -> None:
    state = ClusterState()
    claim = make_claim("c", requests=[exactly("slot", "x")], resource_version="1")
    assert state.set_claim(claim) == {"dra"}  # a new claim: a pod may have waited for it
    taken = allocated(claim, "slot-0", "2")
    assert state.set_claim(taken) == frozenset()  # taking a device helps nobody else
    assert state.set_claim(allocated(claim, "slot-0", "3")) == frozenset()
    released = msgspec.structs.replace(
        claim, metadata=msgspec.structs.replace(claim.metadata, resource_version="4")
    )
    assert state.set_claim(released) == {"dra"}
    assert state.delete_claim("default/c") == {"dra"}
