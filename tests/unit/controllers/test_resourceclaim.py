"""Resource-claim decisions: claims to create for a pod, and the upkeep of a claim."""

from __future__ import annotations

import msgspec

from shared.kube.models import ResourceClaim, ResourceClaimTemplate
from sim.controllers.expectations import Outstanding, PendingCreate
from sim.controllers.resourceclaim import (
    DELETE_PROTECTION_FINALIZER,
    POD_CLAIM_NAME_ANNOTATION,
    ClaimPlan,
    claim_from_template,
    claim_generate_name,
    claim_status_patch,
    claim_statuses_patch,
    plan_claim,
    plan_pod_claims,
)
from tests.unit.controllers.builders import claim, claim_template, owner_ref, pod

NOTHING = Outstanding()
TEMPLATE_CLAIM = {"name": "gpu", "resourceClaimTemplateName": "channel"}
OWNER = owner_ref("Pod", "p", "uid-p", "v1")


def templates(present: bool = True) -> dict[str, ResourceClaimTemplate | None]:
    return {"channel": claim_template() if present else None}


def test_claim_is_made_from_the_template() -> None:
    p = pod("p", claims=[TEMPLATE_CLAIM])
    body = claim_from_template(p, "gpu", claim_template())
    meta = body["metadata"]
    assert meta["generateName"] == "p-gpu-"
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {"cdo.dev/compute-domain": "dom"}
    assert meta["annotations"] == {"note": "x", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert meta["ownerReferences"] == [OWNER]
    assert body["spec"] == {"devices": {"requests": [{"name": "ch", "exactly": {"count": 1}}]}}
    assert (body["apiVersion"], body["kind"]) == ("resource.k8s.io/v1", "ResourceClaim")


def test_long_names_leave_room_for_the_random_suffix() -> None:
    name = claim_generate_name("p" * 60, "claim")
    assert len(name) == 58
    assert name.endswith("-")


def test_a_pod_gets_claims_for_template_entries_only() -> None:
    p = pod("p", claims=[TEMPLATE_CLAIM, {"name": "shared", "resourceClaimName": "fixed"}])
    plan = plan_pod_claims(p, owned_claims=[], outstanding=NOTHING, templates=templates())
    assert [entry for entry, _ in plan.create] == ["gpu"]
    assert plan.record == ()


def test_an_existing_claim_is_recorded_not_created_again() -> None:
    p = pod("p", claims=[TEMPLATE_CLAIM])
    made = claim("p-gpu-abcde", owner=OWNER, entry="gpu")
    plan = plan_pod_claims(p, owned_claims=[made], outstanding=NOTHING, templates=templates())
    assert plan.create == ()
    assert plan.record == (("gpu", "p-gpu-abcde"),)


def test_a_claim_not_in_the_cache_yet_is_not_created_again() -> None:
    p = pod("p", claims=[TEMPLATE_CLAIM])
    pending = Outstanding(
        creates=(PendingCreate(name="p-gpu-zzzzz", resource_version=9, tag="gpu", expires=1e9),)
    )
    plan = plan_pod_claims(p, owned_claims=[], outstanding=pending, templates=templates())
    assert plan.create == ()
    assert plan.record == (("gpu", "p-gpu-zzzzz"),)


def test_recorded_entries_and_finished_or_deleted_pods_need_nothing() -> None:
    recorded = pod(
        "p",
        claims=[TEMPLATE_CLAIM],
        claim_statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}],
    )
    for p in (
        recorded,
        pod("p", claims=[TEMPLATE_CLAIM], phase="Succeeded"),
        pod("p", claims=[TEMPLATE_CLAIM], deleting=True),
    ):
        plan = plan_pod_claims(p, owned_claims=[], outstanding=NOTHING, templates=templates())
        assert (plan.create, plan.record) == ((), ())


def test_a_missing_template_waits() -> None:
    p = pod("p", claims=[TEMPLATE_CLAIM])
    plan = plan_pod_claims(p, owned_claims=[], outstanding=NOTHING, templates=templates(False))
    assert plan.create == ()
    assert plan.missing_templates == ("channel",)


def test_status_patch_merges_by_name_and_guards_the_uid() -> None:
    patch = claim_statuses_patch(pod("p"), [("gpu", "p-gpu-abcde")])
    assert patch == {
        "metadata": {"uid": "uid-p"},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]},
    }


def test_reservations_of_live_pods_stay() -> None:
    c = claim("c", reserved_for=["a"], allocated=True)
    assert plan_claim(c, {"a": pod("a", phase="Running", node="n")}) == ClaimPlan()


def test_reservations_of_gone_replaced_or_finished_pods_go() -> None:
    c = claim("c", reserved_for=["gone", "replaced", "done", "live"], allocated=True)
    pods = {
        "gone": None,
        "replaced": pod("replaced", uid="another"),
        "done": pod("done", phase="Succeeded"),
        "live": pod("live", phase="Running", node="n"),
    }
    plan = plan_claim(c, pods)
    assert plan.reserved_for is not None
    assert [ref.name for ref in plan.reserved_for] == ["live"]
    assert not plan.deallocate
    patch = claim_status_patch(c, plan)
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "status": {
            "reservedFor": [{"resource": "pods", "name": "live", "uid": "uid-live", "apiGroup": ""}]
        },
    }


def test_deleted_before_scheduling_is_done_but_terminating_on_a_node_is_not() -> None:
    c = claim("c", reserved_for=["a"], allocated=True)
    assert plan_claim(c, {"a": pod("a", deleting=True, node="n")}) == ClaimPlan()
    assert plan_claim(c, {"a": pod("a", deleting=True)}).reserved_for == ()


def test_last_reservation_gone_deallocates_and_drops_the_finalizer() -> None:
    c = claim("c", reserved_for=["a"], allocated=True, finalizers=[DELETE_PROTECTION_FINALIZER])
    plan = plan_claim(c, {"a": None})
    assert plan == ClaimPlan(reserved_for=(), deallocate=True, remove_finalizer=True)
    assert claim_status_patch(c, plan) == {
        "metadata": {"resourceVersion": "42"},
        "status": {"reservedFor": None, "allocation": None},
    }


def test_a_deleted_claim_loses_its_allocation_and_finalizer() -> None:
    c = claim("c", allocated=True, finalizers=[DELETE_PROTECTION_FINALIZER], deleting=True)
    assert plan_claim(c, {}) == ClaimPlan(deallocate=True, remove_finalizer=True)


def test_claims_of_done_or_replaced_pods_are_deleted_gone_pods_left_to_gc() -> None:
    c = claim("c", owner=OWNER, entry="gpu")
    assert plan_claim(c, {"p": pod("p", phase="Failed")}).delete
    assert plan_claim(c, {"p": pod("p", uid="other")}).delete
    assert not plan_claim(c, {"p": pod("p", phase="Running")}).delete
    assert not plan_claim(c, {}).delete
    reserved = claim("c", owner=OWNER, entry="gpu", reserved_for=["p"], allocated=True)
    assert not plan_claim(reserved, {"p": pod("p", phase="Running", node="n")}).delete


def test_consumers_other_than_pods_are_kept() -> None:
    c = msgspec.convert(
        {
            "metadata": {"name": "c", "namespace": "ns", "uid": "uid-c"},
            "status": {
                "allocation": {"devices": {"results": []}},
                "reservedFor": [
                    {"apiGroup": "example.com", "resource": "things", "name": "t", "uid": "u"},
                    {"resource": "pods", "name": "gone", "uid": "uid-gone"},
                ],
            },
        },
        ResourceClaim,
    )
    plan = plan_claim(c, {"gone": None})
    assert plan.reserved_for is not None
    assert [ref.resource for ref in plan.reserved_for] == ["things"]
    assert not plan.deallocate
