"""Finalizers, propagation policies and garbage collection, collections and namespaces."""

from __future__ import annotations

from typing import Any

from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .conftest import Http

CMS = "/api/v1/namespaces/default/configmaps"
RS = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"


def _owner_ref(owner: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


async def _exists(http: Http, path: str) -> bool:
    status, _, _ = await http.get(path)
    return status == 200


async def _gone(http: Http, path: str) -> bool:
    return not await _exists(http, path)


async def test_finalizers_defer_deletion(http: Http) -> None:
    await http.post(CMS, {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}})
    status, body, _ = await http.delete(f"{CMS}/f")
    assert status == 200
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert await _exists(http, f"{CMS}/f")
    # No new finalizers once deleting.
    status, err, _ = await http.patch(
        f"{CMS}/f", {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}, MERGE
    )
    assert status == 422
    assert err["message"] == (
        'ConfigMap "f" is invalid: metadata.finalizers: Forbidden: no new finalizers can be '
        "added if the "
        'object is being deleted, found new finalizers []string{"example.com/more"}'
    )
    status, _, _ = await http.patch(f"{CMS}/f", {"metadata": {"finalizers": None}}, MERGE)
    assert status == 200
    assert await _gone(http, f"{CMS}/f")


async def test_delete_bumps_generation_when_marking(http: Http) -> None:
    rs = _replicaset("g")
    rs["metadata"]["finalizers"] = ["example.com/x"]
    await http.post(RS, rs)
    _, body, _ = await http.delete(f"{RS}/g")
    assert body["metadata"]["generation"] == 2


def _replicaset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


async def _owner_and_pods(
    http: Http, name: str, count: int = 2, *, block: bool = False
) -> dict[str, Any]:
    _, owner, _ = await http.post(RS, _replicaset(name))
    for i in range(count):
        pod = {
            "metadata": {
                "name": f"{name}-{i}",
                "ownerReferences": [_owner_ref(owner, block=block)],
            },
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
        status, body, _ = await http.post(PODS, pod)
        assert status == 201, body
    return owner  # type: ignore[no-any-return]


async def test_background_deletion_collects_dependents(http: Http) -> None:
    await _owner_and_pods(http, "bg")
    status, body, _ = await http.delete(f"{RS}/bg")
    assert status == 200 and body["status"] == "Success"
    assert body["details"]["kind"] == "replicasets" and body["details"]["group"] == "apps"
    await wait_for(lambda: _gone(http, f"{PODS}/bg-0"), what="bg-0 collected")
    await wait_for(lambda: _gone(http, f"{PODS}/bg-1"), what="bg-1 collected")


async def test_orphan_deletion_keeps_dependents(http: Http) -> None:
    await _owner_and_pods(http, "or")
    status, body, _ = await http.delete(f"{RS}/or", {"propagationPolicy": "Orphan"})
    assert status == 200
    assert "orphan" in body["metadata"]["finalizers"]
    await wait_for(lambda: _gone(http, f"{RS}/or"), what="owner gone")
    _, pod, _ = await http.get(f"{PODS}/or-0")
    assert "ownerReferences" not in pod["metadata"]


async def test_foreground_deletion_waits_for_dependents(http: Http) -> None:
    await _owner_and_pods(http, "fg", block=True)
    status, body, _ = await http.delete(f"{RS}/fg", params={"propagationPolicy": "Foreground"})
    assert status == 200 and "foregroundDeletion" in body["metadata"]["finalizers"]
    await wait_for(lambda: _gone(http, f"{PODS}/fg-0"), what="dependent deleted first")
    await wait_for(lambda: _gone(http, f"{RS}/fg"), what="owner deleted after dependents")


async def test_dependent_with_another_live_owner_survives(http: Http) -> None:
    _, a, _ = await http.post(RS, _replicaset("a"))
    _, b, _ = await http.post(RS, _replicaset("b"))
    ref_a = _owner_ref(a)
    ref_b = {**_owner_ref(b), "controller": False}
    await http.post(
        PODS,
        {
            "metadata": {"name": "shared", "ownerReferences": [ref_a, ref_b]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    )
    await http.delete(f"{RS}/a")

    async def ref_dropped() -> bool:
        _, pod, _ = await http.get(f"{PODS}/shared")
        return [r["name"] for r in pod["metadata"].get("ownerReferences", [])] == ["b"]

    await wait_for(ref_dropped, what="dangling reference removed")


async def test_delete_preconditions(http: Http) -> None:
    _, obj, _ = await http.post(CMS, {"metadata": {"name": "p"}})
    status, body, _ = await http.delete(f"{CMS}/p", {"preconditions": {"uid": "wrong"}})
    assert status == 409
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "p": Precondition failed: UID in '
        "precondition: wrong, "
        f"UID in object meta: {obj['metadata']['uid']}"
    )
    status, _, _ = await http.delete(f"{CMS}/p", {"preconditions": {"uid": obj["metadata"]["uid"]}})
    assert status == 200


async def test_delete_returns_pod_object(http: Http) -> None:
    await http.post(
        PODS, {"metadata": {"name": "po"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    status, body, _ = await http.delete(f"{PODS}/po")
    assert status == 200 and body["kind"] == "Pod"


async def test_deletecollection_with_selector(http: Http) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        await http.post(CMS, {"metadata": {"name": name, "labels": {"tier": tier}}})
    status, body, _ = await http.delete(CMS, params={"labelSelector": "tier=x"})
    assert status == 200
    assert body["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    _, left, _ = await http.get(CMS, params={"labelSelector": "tier"})
    assert [i["metadata"]["name"] for i in left["items"]] == ["c"]


async def test_namespace_deletion_removes_contents(http: Http, kube: KubeServer) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "doomed"}})
    await http.post("/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "a"}})
    await http.post(
        "/api/v1/namespaces/doomed/configmaps",
        {"metadata": {"name": "held", "finalizers": ["example.com/x"]}},
    )
    status, ns, _ = await http.delete("/api/v1/namespaces/doomed")
    assert status == 200 and ns["status"]["phase"] == "Terminating"
    status, body, _ = await http.post(
        "/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "new"}}
    )
    assert status == 403
    assert body["message"] == (
        'configmaps "new" is forbidden: unable to create new content in namespace doomed '
        "because it is being terminated"
    )
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    await wait_for(
        lambda: _gone(http, "/api/v1/namespaces/doomed/configmaps/a"), what="content removed"
    )
    assert await _exists(http, "/api/v1/namespaces/doomed")  # held by the finalizer
    await http.patch(
        "/api/v1/namespaces/doomed/configmaps/held", {"metadata": {"finalizers": None}}, MERGE
    )
    await wait_for(lambda: _gone(http, "/api/v1/namespaces/doomed"), what="namespace gone")


async def test_protected_namespace_cannot_be_deleted(http: Http) -> None:
    status, body, _ = await http.delete("/api/v1/namespaces/default")
    assert status == 403
    assert body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'


async def test_graceful_pod_deletion_waits_for_the_kubelet(tmp_path: Any) -> None:
    import aiohttp

    from sim.kubeapi import ServerConfig, serve

    async with (
        serve(config=ServerConfig(pod_graceful_deletion=True), kubeconfig=tmp_path / "kc") as kube,
        aiohttp.ClientSession() as session,
    ):
        http = Http(session, kube.url)
        spec = {"containers": [{"name": "c", "image": "i"}], "terminationGracePeriodSeconds": 20}
        await http.post(PODS, {"metadata": {"name": "bound"}, "spec": {**spec, "nodeName": "n1"}})
        await http.post(PODS, {"metadata": {"name": "unbound"}, "spec": spec})
        status, body, _ = await http.delete(f"{PODS}/bound")
        assert status == 200
        assert body["metadata"]["deletionGracePeriodSeconds"] == 20
        assert body["metadata"]["deletionTimestamp"]
        assert await _exists(http, f"{PODS}/bound")
        # An unscheduled pod has no kubelet to wait for.
        await http.delete(f"{PODS}/unbound")
        assert await _gone(http, f"{PODS}/unbound")
        # The kubelet finishes with a zero grace period.
        status, _, _ = await http.delete(f"{PODS}/bound", {"gracePeriodSeconds": 0})
        assert status == 200
        assert await _gone(http, f"{PODS}/bound")
