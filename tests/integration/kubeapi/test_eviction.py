"""The pods/eviction subresource: a delete that a PodDisruptionBudget may refuse, as
kube-apiserver answers it; and ``kubectl drain``, which evicts through it."""

from __future__ import annotations

from typing import Any

from .conftest import Http, Kubectl

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
MERGE = "application/merge-patch+json"


def _pod(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "img:1"}], **spec},
    }


def _eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}


async def _running(http: Http, name: str, labels: dict[str, str], *, ready: bool = True) -> None:
    """A pod bound to no node whose status says Running (and Ready, unless not ``ready``)."""
    status, _, _ = await http.post(PODS, _pod(name, labels))
    assert status == 201
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    body = {"status": {"phase": "Running", "conditions": [condition]}}
    status, _, _ = await http.patch(f"{PODS}/{name}/status", body, MERGE)
    assert status == 200


async def _budget(http: Http, name: str, selector: dict[str, Any], allowed: int) -> None:
    body = {"metadata": {"name": name}, "spec": {"minAvailable": 1, "selector": selector}}
    status, _, _ = await http.post(PDBS, body)
    assert status == 201
    counters = {
        "disruptionsAllowed": allowed,
        "currentHealthy": 2,
        "desiredHealthy": 1,
        "observedGeneration": 1,
    }
    status, _, _ = await http.patch(f"{PDBS}/{name}/status", {"status": counters}, MERGE)
    assert status == 200


async def test_discovery_names_the_eviction_subresource(http: Http) -> None:
    _, core, _ = await http.get("/api/v1")
    entry = next(r for r in core["resources"] if r["name"] == "pods/eviction")
    assert (entry["kind"], entry["group"], entry["version"], entry["verbs"]) == (
        "Eviction",
        "policy",
        "v1",
        ["create"],
    )


async def test_an_eviction_without_a_budget_deletes_the_pod(http: Http) -> None:
    await http.post(PODS, _pod("free", {"app": "x"}))
    status, body, _ = await http.post(f"{PODS}/free/eviction", _eviction("free"))
    assert status == 201 and body["status"] == "Success"
    status, _, _ = await http.get(f"{PODS}/free")
    assert status == 404


async def test_a_budget_with_no_disruption_left_refuses_with_429(http: Http) -> None:
    await _running(http, "held", {"app": "web"})
    await _budget(http, "web", {"matchLabels": {"app": "web"}}, allowed=0)

    status, body, _ = await http.post(f"{PODS}/held/eviction", _eviction("held"))

    assert status == 429
    # kube-apiserver's Status, field for field (retryAfterSeconds 0 is left out).
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 1 healthy pods and has 2 currently",
                }
            ]
        },
        "code": 429,
    }
    status, _, _ = await http.get(f"{PODS}/held")
    assert status == 200


async def test_a_budget_not_yet_processed_asks_to_retry(http: Http) -> None:
    await _running(http, "early", {"app": "new"})
    status, _, _ = await http.post(
        PDBS, {"metadata": {"name": "new"}, "spec": {"maxUnavailable": 1, "selector": {}}}
    )
    assert status == 201

    status, body, headers = await http.post(f"{PODS}/early/eviction", _eviction("early"))

    assert status == 429 and headers["Retry-After"] == "10"
    assert body["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget new is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }


async def test_pending_pods_are_evicted_whatever_their_budget(http: Http) -> None:
    await http.post(PODS, _pod("waiting", {"app": "web"}))
    await _budget(http, "web", {"matchLabels": {"app": "web"}}, allowed=0)

    status, _, _ = await http.post(f"{PODS}/waiting/eviction", _eviction("waiting"))

    assert status == 201


async def test_an_unready_pod_goes_when_the_budget_is_healthy_without_spending_it(
    http: Http,
) -> None:
    await _running(http, "sick", {"app": "db"}, ready=False)
    await _budget(http, "db", {"matchLabels": {"app": "db"}}, allowed=0)

    status, _, _ = await http.post(f"{PODS}/sick/eviction", _eviction("sick"))

    assert status == 201
    _, budget, _ = await http.get(f"{PDBS}/db")
    assert budget["status"]["disruptionsAllowed"] == 0
    assert "disruptedPods" not in budget["status"] or not budget["status"]["disruptedPods"]


async def test_an_evicted_pod_is_marked_a_disruption_target_before_it_goes(http: Http) -> None:
    # Finalizers keep the pod visible after the delete, with what the eviction wrote.
    body = _pod("kept", {"app": "x"})
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await http.post(PODS, body)

    status, _, _ = await http.post(f"{PODS}/kept/eviction", _eviction("kept"))

    assert status == 201
    _, pod, _ = await http.get(f"{PODS}/kept")
    assert pod["metadata"]["deletionTimestamp"]
    (target,) = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )
    await http.patch(f"{PODS}/kept", {"metadata": {"finalizers": None}}, MERGE)


async def test_an_allowed_eviction_spends_one_disruption(http: Http) -> None:
    for name in ("a", "b"):
        await _running(http, name, {"app": "api"})
    await _budget(http, "api", {"matchLabels": {"app": "api"}}, allowed=1)

    status, _, _ = await http.post(f"{PODS}/a/eviction", _eviction("a"))
    assert status == 201
    _, budget, _ = await http.get(f"{PDBS}/api")
    assert budget["status"]["disruptionsAllowed"] == 0
    assert set(budget["status"]["disruptedPods"]) == {"a"}
    (condition,) = budget["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "False",
        "InsufficientPods",
    )
    status, _, _ = await http.post(f"{PODS}/b/eviction", _eviction("b"))
    assert status == 429


async def test_two_budgets_for_one_pod_are_an_error(http: Http) -> None:
    await _running(http, "twice", {"app": "db"})
    await _budget(http, "one", {"matchLabels": {"app": "db"}}, allowed=1)
    await _budget(http, "all", {}, allowed=1)

    status, body, _ = await http.post(f"{PODS}/twice/eviction", _eviction("twice"))

    assert status == 500 and "more than one PodDisruptionBudget" in body["message"]


async def test_a_finished_pod_is_evicted_whatever_its_budget(http: Http) -> None:
    await http.post(PODS, _pod("done", {"app": "job"}))
    await http.patch(f"{PODS}/done/status", {"status": {"phase": "Succeeded"}}, MERGE)
    await _budget(http, "job", {"matchLabels": {"app": "job"}}, allowed=0)

    status, _, _ = await http.post(f"{PODS}/done/eviction", _eviction("done"))

    assert status == 201


async def test_kubectl_drain_evicts_through_the_subresource(http: Http, kubectl: Kubectl) -> None:
    node = {
        "metadata": {"name": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    status, _, _ = await http.post("/api/v1/nodes", node)
    assert status == 201
    await http.post(PODS, _pod("on-n1", {"app": "w"}, nodeName="n1"))

    code, out, err = await kubectl("drain", "n1", "--force", "--timeout=20s")

    assert code == 0, err
    assert "evicting pod default/on-n1" in out + err and "drained" in out
    status, _, _ = await http.get(f"{PODS}/on-n1")
    assert status == 404
    _, found, _ = await http.get("/api/v1/nodes/n1")
    assert found["spec"]["unschedulable"] is True
