"""Built-in kinds: required fields, immutability, pods (scheduling gates, binding), DRA."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi import ServerConfig

from .conftest import Http, with_beta_apis


@pytest.fixture
def kube_config() -> ServerConfig:
    """DRA's beta versions served too: some tests here read and write them."""
    return with_beta_apis()


PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "img:1"}], **spec},
    }


def _template(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"


def _cronjob(
    name: str,
    *,
    schedule: str,
    restart_policy: str = "OnFailure",
    **spec: Any,
) -> dict[str, Any]:
    job = {"template": _template({}, restartPolicy=restart_policy)}
    return {
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": job}, **spec},
    }


@pytest.mark.parametrize(
    ("path", "body", "field", "reason"),
    [
        (PODS, {"metadata": {"name": "p"}, "spec": {}}, "spec.containers", "FieldValueRequired"),
        (
            PODS,
            {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
            "spec.containers[0].image",
            "FieldValueRequired",
        ),
        (
            PODS,
            {"metadata": {"name": "p"}, "spec": {"containers": [{"image": "i"}]}},
            "spec.containers[0].name",
            "FieldValueRequired",
        ),
        (
            PODS,
            {
                "metadata": {"name": "Bad_Name"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            "metadata.name",
            "FieldValueInvalid",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            {"metadata": {"name": "d"}, "spec": {"template": _template({"a": "b"})}},
            "spec.selector",
            "FieldValueRequired",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            {
                "metadata": {"name": "d"},
                "spec": {
                    "selector": {"matchLabels": {"a": "x"}},
                    "template": _template({"a": "b"}),
                },
            },
            "spec.template.metadata.labels",
            "FieldValueInvalid",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            {
                "metadata": {"name": "j"},
                "spec": {"template": _template({}, restartPolicy="Always")},
            },
            "spec.template.spec.restartPolicy",
            "FieldValueNotSupported",
        ),
        (CRONJOBS, _cronjob("c", schedule=""), "spec.schedule", "FieldValueRequired"),
        (CRONJOBS, _cronjob("c", schedule="every day"), "spec.schedule", "FieldValueInvalid"),
        (
            CRONJOBS,
            _cronjob("c", schedule="0 3 * * *", timeZone="Mars/Olympus"),
            "spec.timeZone",
            "FieldValueInvalid",
        ),
        (CRONJOBS, _cronjob("c" * 53, schedule="@daily"), "metadata.name", "FieldValueInvalid"),
        (
            CRONJOBS,
            _cronjob("c", schedule="@daily", restart_policy="Always"),
            "spec.jobTemplate.spec.template.spec.restartPolicy",
            "FieldValueNotSupported",
        ),
        (
            "/api/v1/namespaces/default/services",
            {"metadata": {"name": "s"}, "spec": {}},
            "spec.ports",
            "FieldValueRequired",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "c"}, "data": {"bad key": "v"}},
            "data",
            "FieldValueInvalid",
        ),
        (
            "/api/v1/namespaces/default/events",
            {"metadata": {"name": "e"}},
            "involvedObject",
            "FieldValueRequired",
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}},
            "spec.leaseDurationSeconds",
            "FieldValueInvalid",
        ),
        (
            "/apis/resource.k8s.io/v1/resourceslices",
            {
                "metadata": {"name": "s"},
                "spec": {"pool": {"name": "p", "resourceSliceCount": 1}, "nodeName": "n"},
            },
            "spec.driver",
            "FieldValueRequired",
        ),
        (
            "/apis/resource.k8s.io/v1/resourceslices",
            {
                "metadata": {"name": "s"},
                "spec": {"driver": "d.example.com", "pool": {"name": "p", "resourceSliceCount": 1}},
            },
            "spec",
            "FieldValueRequired",
        ),
        (
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            {
                "metadata": {"name": "c"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {}}]}},
            },
            "spec.devices.requests[0].exactly.deviceClassName",
            "FieldValueRequired",
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "metadata": {"name": "w"},
                "webhooks": [
                    {
                        "name": "short",
                        "clientConfig": {"url": "https://x"},
                        "admissionReviewVersions": ["v1"],
                    }
                ],
            },
            "webhooks[0].sideEffects",
            "FieldValueRequired",
        ),
        (
            "/api/v1/namespaces",
            {"metadata": {"name": "Not.A.Label"}},
            "metadata.name",
            "FieldValueInvalid",
        ),
    ],
)
async def test_required_fields(
    http: Http, path: str, body: dict[str, Any], field: str, reason: str
) -> None:
    status, result, _ = await http.post(path, body)
    assert status == 422, result
    assert result["reason"] == "Invalid"
    causes = {(c["field"], c["reason"]) for c in result["details"]["causes"]}
    assert (field, reason) in causes


async def test_invalid_message_shape(http: Http) -> None:
    status, body, _ = await http.post(
        PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    )
    assert status == 422
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Pod "p" is invalid: spec.containers[0].image: Required value',
        "reason": "Invalid",
        "details": {
            "name": "p",
            "kind": "Pod",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": "spec.containers[0].image",
                }
            ],
        },
        "code": 422,
    }


async def test_wrong_json_type_is_400(http: Http) -> None:
    status, body, _ = await http.post(
        PODS, {"metadata": {"name": "p"}, "spec": {"containers": "nope"}}
    )
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"].startswith('Pod in version "v1" cannot be handled as a Pod')


async def test_pod_defaults_and_status(http: Http) -> None:
    status, pod, _ = await http.post(PODS, _pod("p"))
    assert status == 201
    assert (
        pod["spec"]["restartPolicy"] == "Always"
        and pod["spec"]["schedulerName"] == "default-scheduler"
    )
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


async def test_scheduling_gates(http: Http) -> None:
    status, pod, _ = await http.post(
        PODS, _pod("g", schedulingGates=[{"name": "example.com/gate"}], nodeSelector={"a": "1"})
    )
    assert status == 201
    cond = pod["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodScheduled",
        "False",
        "SchedulingGated",
    )
    # Adding a gate after creation is forbidden.
    status, body, _ = await http.patch(
        f"{PODS}/g",
        {"spec": {"schedulingGates": [{"name": "example.com/gate"}, {"name": "example.com/new"}]}},
        MERGE,
    )
    assert status == 422
    assert (
        "only deletion is allowed, but found new scheduling gate 'example.com/new'"
        in body["message"]
    )
    # nodeSelector may gain entries while gated, but not change existing ones.
    status, body, _ = await http.patch(
        f"{PODS}/g", {"spec": {"nodeSelector": {"a": "1", "b": "2"}}}, MERGE
    )
    assert status == 200, body
    status, body, _ = await http.patch(
        f"{PODS}/g", {"spec": {"nodeSelector": {"a": "9", "b": "2"}}}, MERGE
    )
    assert status == 422 and "only additions to spec.nodeSelector are allowed" in body["message"]
    # Removing the gate is allowed; afterwards nodeSelector is immutable like the rest of the spec.
    status, body, _ = await http.patch(
        f"{PODS}/g", [{"op": "remove", "path": "/spec/schedulingGates"}], JSONP
    )
    assert status == 200 and "schedulingGates" not in body["spec"]
    status, body, _ = await http.patch(f"{PODS}/g", {"spec": {"nodeSelector": {"c": "3"}}}, MERGE)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec"


async def test_gated_pod_cannot_be_created_bound(http: Http) -> None:
    status, body, _ = await http.post(
        PODS, _pod("gb", schedulingGates=[{"name": "x"}], nodeName="n1")
    )
    assert status == 422
    assert (
        "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
        in body["message"]
    )


async def test_binding_subresource(http: Http) -> None:
    await http.post(PODS, _pod("b"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "b"},
        "target": {"kind": "Node", "name": "n1"},
    }
    status, body, _ = await http.post(f"{PODS}/b/binding", binding)
    assert status == 201 and body["status"] == "Success"
    _, pod, _ = await http.get(f"{PODS}/b")
    assert pod["spec"]["nodeName"] == "n1"
    assert any(
        c["type"] == "PodScheduled" and c["status"] == "True" for c in pod["status"]["conditions"]
    )
    status, body, _ = await http.post(f"{PODS}/b/binding", binding)
    assert status == 409
    assert (
        body["message"]
        == 'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to '
        'node "n1"'
    )
    _, listed, _ = await http.get(PODS, params={"fieldSelector": "spec.nodeName=n1"})
    assert [p["metadata"]["name"] for p in listed["items"]] == ["b"]


async def test_deployment_selector_is_immutable(http: Http) -> None:
    dep = {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": _template({"a": "b"})},
    }
    status, _, _ = await http.post("/apis/apps/v1/namespaces/default/deployments", dep)
    assert status == 201
    status, body, _ = await http.patch(
        "/apis/apps/v1/namespaces/default/deployments/d",
        {
            "spec": {
                "selector": {"matchLabels": {"a": "c"}},
                "template": {"metadata": {"labels": {"a": "c"}}},
            }
        },
        MERGE,
    )
    assert (
        status == 422
        and "spec.selector: Invalid value" in body["message"]
        and "field is immutable" in body["message"]
    )


async def test_job_gets_generated_selector(http: Http) -> None:
    status, job, _ = await http.post(
        "/apis/batch/v1/namespaces/default/jobs",
        {"metadata": {"name": "j"}, "spec": {"template": _template({}, restartPolicy="Never")}},
    )
    assert status == 201, job
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"


async def test_an_indexed_jobs_completions_change_only_together_with_its_parallelism(
    http: Http,
) -> None:
    """Elastic Indexed Jobs (GA in Kubernetes 1.31): completions may change while it equals
    parallelism before and after; otherwise it is immutable."""
    path = "/apis/batch/v1/namespaces/default/jobs"
    for name, mode in (("indexed", "Indexed"), ("plain", "NonIndexed")):
        spec = {
            "completionMode": mode,
            "completions": 4,
            "parallelism": 4,
            "template": _template({}, restartPolicy="Never"),
        }
        status, _, _ = await http.post(path, {"metadata": {"name": name}, "spec": spec})
        assert status == 201
    both = {"spec": {"completions": 6, "parallelism": 6}}
    status, job, _ = await http.patch(f"{path}/indexed", both, MERGE)
    assert status == 200 and job["spec"]["completions"] == 6, job
    for name, patch in (("indexed", {"spec": {"completions": 5}}), ("plain", both)):
        status, body, _ = await http.patch(f"{path}/{name}", patch, MERGE)
        assert status == 422 and "spec.completions" in body["message"], body
        assert "field is immutable" in body["message"]


async def test_secret_string_data_and_type_selector(http: Http) -> None:
    status, secret, _ = await http.post(
        "/api/v1/namespaces/default/secrets",
        {"metadata": {"name": "s"}, "stringData": {"pw": "hunter2"}},
    )
    assert status == 201
    assert (
        secret["data"] == {"pw": "aHVudGVyMg=="}
        and "stringData" not in secret
        and secret["type"] == "Opaque"
    )
    _, listed, _ = await http.get(
        "/api/v1/namespaces/default/secrets", params={"fieldSelector": "type=Opaque"}
    )
    assert [s["metadata"]["name"] for s in listed["items"]] == ["s"]


async def test_service_gets_cluster_ip(http: Http) -> None:
    status, svc, _ = await http.post(
        "/api/v1/namespaces/default/services",
        {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
    )
    assert status == 201
    assert (
        svc["spec"]["clusterIP"].startswith("10.") and svc["spec"]["ports"][0]["targetPort"] == 80
    )


async def test_events_in_both_groups_share_storage(http: Http) -> None:
    core_event = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Started",
        "message": "hello",
        "type": "Normal",
    }
    status, _, _ = await http.post("/api/v1/namespaces/default/events", core_event)
    assert status == 201
    status, body, _ = await http.get("/apis/events.k8s.io/v1/namespaces/default/events/e1")
    assert status == 200
    assert body["apiVersion"] == "events.k8s.io/v1"
    assert body["note"] == "hello" and body["regarding"]["name"] == "p"
    _, listed, _ = await http.get(
        "/api/v1/namespaces/default/events",
        params={"fieldSelector": "involvedObject.name=p,reason=Started"},
    )
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e1"]


async def test_dra_served_as_v1_and_v1beta1(http: Http) -> None:
    claim_v1beta1 = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "deviceClassName": "imex.example.com"}]}},
    }
    status, body, _ = await http.post(
        "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims", claim_v1beta1
    )
    assert status == 201, body
    assert body["spec"]["devices"]["requests"][0]["deviceClassName"] == "imex.example.com"
    _, v1, _ = await http.get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c")
    assert v1["spec"]["devices"]["requests"][0] == {
        "name": "r",
        "exactly": {
            "deviceClassName": "imex.example.com",
            "allocationMode": "ExactCount",
            "count": 1,
        },
    }
    status, body, _ = await http.patch(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c",
        {
            "spec": {
                "devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "x"}}]}
            }
        },
        MERGE,
    )
    assert (
        status == 422
        and "spec: Invalid value" in body["message"]
        and "field is immutable" in body["message"]
    )
    status, body, _ = await http.patch(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status",
        {
            "status": {
                "allocation": {"devices": {"results": []}},
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
            }
        },
        MERGE,
    )
    assert status == 200, body
    slice_v1 = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-imex"},
        "spec": {
            "driver": "imex.example.com",
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": "slot-0", "attributes": {"clique": {"string": "abc.1"}}}],
        },
    }
    status, body, _ = await http.post("/apis/resource.k8s.io/v1/resourceslices", slice_v1)
    assert status == 201, body
    _, beta, _ = await http.get("/apis/resource.k8s.io/v1beta1/resourceslices/n1-imex")
    assert beta["spec"]["devices"][0] == {
        "name": "slot-0",
        "basic": {"attributes": {"clique": {"string": "abc.1"}}},
    }
    _, by_node, _ = await http.get(
        "/apis/resource.k8s.io/v1/resourceslices",
        params={"fieldSelector": "spec.nodeName=n1,spec.driver=imex.example.com"},
    )
    assert [s["metadata"]["name"] for s in by_node["items"]] == ["n1-imex"]


async def test_node_status_and_unschedulable_selector(http: Http) -> None:
    node = {
        "metadata": {"name": "n1"},
        "spec": {"unschedulable": True},
        "status": {"capacity": {"nvidia.com/gpu": "4"}},
    }
    status, body, _ = await http.post("/api/v1/nodes", node)
    assert status == 201 and body["status"]["capacity"] == {"nvidia.com/gpu": "4"}
    _, listed, _ = await http.get(
        "/api/v1/nodes", params={"fieldSelector": "spec.unschedulable=true"}
    )
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]


async def test_daemonset_and_statefulset(http: Http) -> None:
    ds = {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": _template({"a": "b"})},
    }
    status, body, _ = await http.post("/apis/apps/v1/namespaces/default/daemonsets", ds)
    assert status == 201
    assert body["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    status, body, _ = await http.patch(
        "/apis/apps/v1/namespaces/default/daemonsets/agent/status",
        {"status": {"numberReady": 3}},
        MERGE,
    )
    assert status == 200 and body["status"]["numberReady"] == 3
    sts = {
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "selector": {"matchLabels": {"a": "c"}},
            "template": _template({"a": "c"}),
        },
    }
    status, body, _ = await http.post("/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert status == 201 and body["spec"]["podManagementPolicy"] == "OrderedReady"
    status, _, _ = await http.patch(
        "/apis/apps/v1/namespaces/default/statefulsets/db", {"spec": {"replicas": 3}}, MERGE
    )
    assert status == 200
    status, body, _ = await http.patch(
        "/apis/apps/v1/namespaces/default/statefulsets/db", {"spec": {"serviceName": "x"}}, MERGE
    )
    assert status == 422 and "updates to statefulset spec for fields other than" in body["message"]


async def test_device_class_and_claim_template(http: Http) -> None:
    device_class = {
        "metadata": {"name": "imex.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
    }
    status, body, _ = await http.post("/apis/resource.k8s.io/v1/deviceclasses", device_class)
    assert status == 201 and body["metadata"]["generation"] == 1
    template_v1beta1 = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "channel"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "ch", "deviceClassName": "imex.example.com"}]}
            }
        },
    }
    status, body, _ = await http.post(
        "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaimtemplates", template_v1beta1
    )
    assert status == 201, body
    _, v1, _ = await http.get(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/channel"
    )
    assert (
        v1["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
        == "imex.example.com"
    )
    status, body, _ = await http.patch(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/channel",
        {
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "x", "exactly": {"deviceClassName": "y"}}]}
                }
            }
        },
        MERGE,
    )
    assert status == 422 and "field is immutable" in body["message"]


async def test_resource_quantities_are_written_back_as_strings(http: Http) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "q"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x:1",
                    "resources": {
                        "limits": {"nvidia.com/gpu": 4, "cpu": 0.5},
                        "requests": {"memory": "1Gi", "cpu": 2},
                    },
                }
            ]
        },
    }
    status, body, _ = await http.post("/api/v1/namespaces/default/pods", pod)
    assert status == 201, body
    resources = body["spec"]["containers"][0]["resources"]
    assert resources == {
        "limits": {"nvidia.com/gpu": "4", "cpu": "500m"},
        "requests": {"memory": "1Gi", "cpu": "2"},
    }


async def test_statefulset_containers_may_mount_claim_templates(http: Http) -> None:
    template = _template({"a": "db"})
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": 1}}},
    }
    sts: dict[str, Any] = {
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "selector": {"matchLabels": {"a": "db"}},
            "template": template,
            "volumeClaimTemplates": [claim],
        },
    }
    status, body, _ = await http.post("/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert status == 201, body
    [stored] = body["spec"]["volumeClaimTemplates"]
    assert stored["apiVersion"] == "v1" and stored["kind"] == "PersistentVolumeClaim"
    assert stored["spec"]["volumeMode"] == "Filesystem"
    assert stored["spec"]["resources"] == {"requests": {"storage": "1"}}
    assert stored["status"] == {"phase": "Pending"}
    # A mount naming neither a volume nor a claim template is still refused.
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "cache", "mountPath": "/c"}]
    sts["metadata"]["name"] = "db2"
    status, body, _ = await http.post("/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert status == 422
    [cause] = body["details"]["causes"]
    assert cause["field"] == "spec.template.spec.containers[0].volumeMounts[0].name"
    assert cause["reason"] == "FieldValueNotFound"
    # Deployments have no claim templates: the same mount is unknown there.
    deployment = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"a": "db"}}, "template": template},
    }
    status, _, _ = await http.post("/apis/apps/v1/namespaces/default/deployments", deployment)
    assert status == 422


async def test_cronjob_defaults(http: Http) -> None:
    status, body, _ = await http.post(CRONJOBS, _cronjob("nightly", schedule="17 3 * * *"))
    assert status == 201, body
    spec = body["spec"]
    assert spec["concurrencyPolicy"] == "Allow" and spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    assert spec["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert body["status"] == {}
