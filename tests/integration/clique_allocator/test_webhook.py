"""The pod webhook over HTTPS, registered in the API server: it gates a domain's pods and only
those; pods it should not see never reach it."""

from __future__ import annotations

import pytest

from services.clique_allocator.webhook.configuration import DEFAULT_NAME
from shared.kube.errors import KubeApiError
from shared.kube.resources import PODS
from tests.support.wait import wait_for

from .conftest import LEASE_DURATION_S, AllocatorFactory
from .harness import MUTATING, Allocator, Api, Tls, gated


async def admissions(allocator: Allocator, result: str = "") -> float:
    labels = {"result": result} if result else {}
    return await allocator.counter("cdo_admissions_total", **labels)


async def test_only_pods_with_a_domains_claim_template_are_gated(
    api: Api, allocator: Allocator
) -> None:
    await api.create_domain("train")
    await api.create_template("plain-rct")  # a user's own template, no domain

    domain_pod = await api.create_pod("domain-pod", template="train-rct")
    assert gated(domain_pod)
    assert await admissions(allocator, "gated") == 1
    # Every review answered is timed: bench.e2e reads the webhook's stage from it.
    assert await allocator.counter("cdo_admission_seconds_count") == 1

    sent = await admissions(allocator)
    no_claims = await api.create_pod("no-claims")
    by_name = await api.create_pod("by-name", claim_name="some-claim")
    assert not gated(no_claims) and not gated(by_name)
    # The match condition keeps them from the webhook altogether.
    assert await admissions(allocator) == sent

    plain = await api.create_pod("plain", template="plain-rct")
    assert not gated(plain)
    assert await admissions(allocator, "passed") == 1

    # A pod that already has a gate of its own keeps it and gets ours after it.
    raw = await api.client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "two-gates", "namespace": "default"},
            "spec": {
                "schedulingGates": [{"name": "example.com/quota"}],
                "containers": [{"name": "main", "image": "trainer"}],
                "resourceClaims": [{"name": "c", "resourceClaimTemplateName": "train-rct"}],
            },
        },
        namespace="default",
    )
    assert b'"example.com/quota"},{"name":"cdo.dev/placement"' in raw.replace(b" ", b"")


async def test_a_template_not_yet_cached_or_created_is_looked_up(
    api: Api, allocator: Allocator
) -> None:
    # The domain exists but its template does not yet (the domain controller is slower than
    # the workload): its pods are gated all the same.
    await api.create_domain("early", label_template=False)
    await wait_for(lambda: _cached(allocator), what="domain in the allocator's cache")
    assert gated(await api.create_pod("early-pod", template="early-rct"))
    # A template that nobody labels and no domain names: looked up, not gated.
    assert not gated(await api.create_pod("nobody", template="missing-rct"))


async def _cached(allocator: Allocator) -> bool:
    return await allocator.counter("cdo_informer_events_total", resource="computedomains") > 0


async def _leading(allocator: Allocator) -> bool:
    return await allocator.counter("leader_election_master_status") == 1


async def test_system_namespaces_are_left_out(api: Api, allocator: Allocator) -> None:
    await api.create_namespace("cdo-system")
    await api.create_domain("infra", namespace="cdo-system")
    pod = await api.create_pod("infra-pod", template="infra-rct", namespace="cdo-system")
    assert not gated(pod)


async def test_a_standby_serves_the_webhook_and_only_the_leader_places(
    api: Api, start_allocator: AllocatorFactory, tls: Tls
) -> None:
    leader = start_allocator("ca-lead")
    await leader.wait_ready()
    # Ready says the caches are synced, not that the Lease is held: wait for that too.
    await wait_for(
        lambda: _leading(leader), timeout=LEASE_DURATION_S * 5, what="ca-lead holding the Lease"
    )
    standby = start_allocator("ca-standby")
    await standby.wait_ready()
    await api.register_webhook(tls, standby.webhook_port)
    await api.create_rack(0)
    await api.create_domain("train")
    uid = await api.create_replicaset("train-rs", replicas=2)
    names = await api.create_gated_pods("train", 2, template="train-rct", owner=("train-rs", uid))
    assert await admissions(standby, "gated") == 2

    async def ungated() -> bool:
        return not any(gated(pod) for pod in await api.pods() if pod.metadata.name in names)

    await wait_for(ungated, what="the leader placed the gang")
    await leader.wait_idle()
    assert await leader.counter("controller_runtime_reconcile_total", controller="placements") > 0
    assert await standby.counter("controller_runtime_reconcile_total", controller="placements") == 0


async def test_while_no_replica_answers_only_domain_pods_are_refused(
    api: Api, allocator: Allocator, start_allocator: AllocatorFactory, tls: Tls
) -> None:
    await api.create_domain("train")
    await api.create_template("other-rct")  # another DRA driver's template, say
    allocator.stop()
    # Pods of no domain go through: the webhook fails open.
    assert not gated(await api.create_pod("ordinary"))
    assert not gated(await api.create_pod("other-driver", template="other-rct"))
    # A domain's pod would come out ungated: the pod-gate policy refuses it, in the API server.
    with pytest.raises(KubeApiError) as refused:
        await api.create_pod("domain-pod", template="train-rct")
    assert refused.value.code == 403
    assert "ValidatingAdmissionPolicy 'cdo-pod-gate'" in refused.value.message
    assert (
        "the pod uses ResourceClaimTemplate train-rct of ComputeDomain train and no clique "
        "allocator replica answered the pod webhook" in refused.value.message
    )
    # A replica answers again: the workload's next try is admitted, gated.
    back = start_allocator("ca-back")
    await back.wait_ready()
    await api.client.request("DELETE", f"{MUTATING}/{DEFAULT_NAME}")
    await api.register_webhook(tls, back.webhook_port)
    assert gated(await api.create_pod("domain-pod", template="train-rct"))


async def test_a_domain_with_a_template_name_conflict_holds_no_pod_back(
    api: Api, allocator: Allocator
) -> None:
    # A user's own template of that name: the domain is not served (the domain controller
    # says so in Ready), and pods of the user's template are the user's.
    await api.create_template("clash-rct")
    await api.create_domain("clash", label_template=False)
    await api.set_domain_ready("clash", "False", reason="TemplateNameConflict")
    allocator.stop()
    assert not gated(await api.create_pod("users-pod", template="clash-rct"))
