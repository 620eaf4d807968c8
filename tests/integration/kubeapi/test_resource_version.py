"""The global resourceVersion, no-op writes, list RV rules, pagination and compaction."""

from __future__ import annotations

import pytest

from sim.kubeapi import KubeServer, ServerConfig

from .conftest import Http

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def kube_config() -> ServerConfig:
    return ServerConfig(too_large_rv_wait_s=0.3)


async def _create(http: Http, name: str, **labels: str) -> dict[str, object]:
    status, body, _ = await http.post(
        CMS, {"metadata": {"name": name, "labels": labels}, "data": {"k": name}}
    )
    assert status == 201, body
    return body  # type: ignore[no-any-return]


async def test_one_counter_across_kinds(http: Http) -> None:
    a = await _create(http, "a")
    _, node, _ = await http.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
    b = await _create(http, "b")
    rvs = [int(x["metadata"]["resourceVersion"]) for x in (a, node, b)]  # type: ignore[index]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert rvs[2] - rvs[0] == 2


async def test_noop_update_does_not_bump(http: Http, kube: KubeServer) -> None:
    obj = await _create(http, "same")
    before = kube.store.rv
    status, again, _ = await http.put(f"{CMS}/same", obj)
    assert status == 200
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]  # type: ignore[index]
    assert kube.store.rv == before
    status, again, _ = await http.patch(
        f"{CMS}/same", {"data": {"k": "same"}}, "application/merge-patch+json"
    )
    assert status == 200 and kube.store.rv == before


async def test_list_rv_is_current_counter(http: Http, kube: KubeServer) -> None:
    await _create(http, "x")
    await http.post("/api/v1/nodes", {"metadata": {"name": "n9"}})
    _, body, _ = await http.get(CMS)
    assert body["metadata"]["resourceVersion"] == str(kube.store.rv)


async def test_limit_and_continue_walk_a_consistent_snapshot(http: Http) -> None:
    for i in range(7):
        await _create(http, f"p{i}")
    _, first, _ = await http.get(CMS, params={"limit": "3"})
    assert [i["metadata"]["name"] for i in first["items"]] == ["p0", "p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 4
    token = first["metadata"]["continue"]
    # A change after the first page must not show up in later pages.
    await http.delete(f"{CMS}/p4")
    await _create(http, "p9")
    _, second, _ = await http.get(CMS, params={"limit": "3", "continue": token})
    assert [i["metadata"]["name"] for i in second["items"]] == ["p3", "p4", "p5"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    _, third, _ = await http.get(
        CMS, params={"limit": "3", "continue": second["metadata"]["continue"]}
    )
    assert [i["metadata"]["name"] for i in third["items"]] == ["p6"]
    assert "continue" not in third["metadata"]


async def test_expired_continue_is_410(http: Http, kube: KubeServer) -> None:
    for i in range(3):
        await _create(http, f"e{i}")
    _, first, _ = await http.get(CMS, params={"limit": "1"})
    await _create(http, "later")
    kube.compact()
    status, body, _ = await http.get(
        CMS, params={"limit": "1", "continue": first["metadata"]["continue"]}
    )
    assert status == 410
    assert body["reason"] == "Expired"
    assert body["message"].startswith("The provided continue parameter is too old")


async def test_bad_continue_is_400(http: Http) -> None:
    status, body, _ = await http.get(CMS, params={"continue": "not-a-token"})
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"].startswith("continue key is not valid")


async def test_exact_rv_reads_the_past(http: Http) -> None:
    a = await _create(http, "v")
    rv = a["metadata"]["resourceVersion"]  # type: ignore[index]
    await http.patch(f"{CMS}/v", {"data": {"k": "changed"}}, "application/merge-patch+json")
    await _create(http, "w")
    _, past, _ = await http.get(
        CMS, params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    )
    assert past["metadata"]["resourceVersion"] == rv
    assert [(i["metadata"]["name"], i["data"]["k"]) for i in past["items"]] == [("v", "v")]
    _, now, _ = await http.get(
        CMS, params={"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}
    )
    assert [(i["metadata"]["name"], i["data"]["k"]) for i in now["items"]] == [
        ("v", "changed"),
        ("w", "w"),
    ]


async def test_exact_rv_after_compaction_is_410(http: Http, kube: KubeServer) -> None:
    a = await _create(http, "old")
    await _create(http, "new")
    kube.compact()
    rv = a["metadata"]["resourceVersion"]  # type: ignore[index]
    status, body, _ = await http.get(
        CMS, params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    )
    assert status == 410 and body["reason"] == "Expired"
    assert body["message"] == f"too old resource version: {rv} ({kube.store.rv})"


async def test_rv_zero_ignores_limit(http: Http) -> None:
    for i in range(4):
        await _create(http, f"z{i}")
    _, body, _ = await http.get(CMS, params={"resourceVersion": "0", "limit": "2"})
    assert len(body["items"]) == 4 and "continue" not in body["metadata"]


async def test_rv_match_rules_are_validated(http: Http) -> None:
    status, body, _ = await http.get(CMS, params={"resourceVersionMatch": "Exact"})
    assert status == 422
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided"
    )
    assert body["details"]["group"] == "meta.k8s.io" and body["details"]["kind"] == "ListOptions"
    status, body, _ = await http.get(
        CMS, params={"resourceVersion": "0", "resourceVersionMatch": "Exact"}
    )
    assert (
        status == 422
        and 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"' in body["message"]
    )
    status, body, _ = await http.get(
        CMS, params={"resourceVersion": "1", "resourceVersionMatch": "Bogus"}
    )
    assert status == 422 and "Unsupported value" in body["message"]
    status, body, _ = await http.get(CMS, params={"resourceVersion": "5", "continue": "abc"})
    assert (
        status == 400
        and body["message"] == "specifying resource version is not allowed when using continue"
    )


async def test_too_large_rv_times_out_with_504(kube: KubeServer, http: Http) -> None:
    status, body, _ = await http.get(
        CMS,
        params={
            "resourceVersion": str(kube.store.rv + 1000),
            "resourceVersionMatch": "NotOlderThan",
        },
    )
    assert status == 504
    assert body["reason"] == "Timeout"
    assert body["message"].startswith("Timeout: Too large resource version")
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
