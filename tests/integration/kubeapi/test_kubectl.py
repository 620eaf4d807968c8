"""The real kubectl binary against the emulator: every command a platform team uses."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.wait import wait_for

from .conftest import KUBECTL, Http, Kubectl
from .crds import WIDGET_CRD

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
"""

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web}
data:
  mode: fast
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports: [{containerPort: 80}]
"""


async def _start_watch(kubectl: Kubectl, *args: str) -> asyncio.subprocess.Process:
    env = dict(os.environ, KUBECONFIG=str(kubectl.kubeconfig), HOME=str(kubectl.cache_dir.parent))
    return await asyncio.create_subprocess_exec(
        str(KUBECTL),
        "--cache-dir",
        str(kubectl.cache_dir),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def test_crd_and_custom_resources(kubectl: Kubectl, http: Http, tmp_path: Path) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(yaml.safe_dump(WIDGET_CRD))
    out = await kubectl.ok("apply", "-f", str(crd_file))
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" in out
    await kubectl.ok(
        "wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=10s"
    )
    out = await kubectl.ok("apply", "-f", "-", stdin=WIDGET)
    assert "widget.example.com/w1 created" in out

    table = await kubectl.ok("get", "widgets")
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "SIZE", "READY", "AGE"]
    assert row.split()[:2] == ["w1", "3"]

    doc = yaml.safe_load(await kubectl.ok("get", "wd", "w1", "-o", "yaml"))
    assert doc["spec"] == {"size": 3, "maxSize": 10, "mode": "fast"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in doc["metadata"]["annotations"]
    described = await kubectl.ok("describe", "widget", "w1")
    assert "Max Size:  10" in described and "Kind:         Widget" in described

    watcher = await _start_watch(kubectl, "get", "widgets", "-w", "--output-watch-events")
    lines: list[str] = []

    def reader(event: str, ready: bool) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            assert watcher.stdout is not None
            line = (await asyncio.wait_for(watcher.stdout.readline(), 10)).decode()
            lines.append(line)
            cells = line.split()
            return cells[:2] == [event, "w1"] and ("True" in cells) == ready

        return probe

    try:
        await wait_for(reader("ADDED", False), timeout=20, what="kubectl get -w lists w1")
        waiter = asyncio.create_task(
            kubectl("wait", "--for=condition=Ready", "widget/w1", "--timeout=20s")
        )
        await http.patch(
            "/apis/example.com/v1/namespaces/default/widgets/w1/status",
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            "application/merge-patch+json",
        )
        rc, out, err = await asyncio.wait_for(waiter, 30)
        assert rc == 0, err
        assert "widget.example.com/w1 condition met" in out
        await wait_for(reader("MODIFIED", True), timeout=20, what="kubectl get -w shows Ready=True")
    finally:
        watcher.kill()
        await watcher.wait()
    assert lines[0].split()[:5] == ["EVENT", "NAME", "SIZE", "READY", "AGE"]

    applied = WIDGET.replace("size: 3", "size: 4")
    out = await kubectl.ok("apply", "--server-side", "-f", "-", stdin=applied)
    assert "widget.example.com/w1 serverside-applied" in out
    _, obj, _ = await http.get("/apis/example.com/v1/namespaces/default/widgets/w1")
    assert obj["spec"]["size"] == 4
    assert any(
        m["manager"] == "kubectl" and m["operation"] == "Apply"
        for m in obj["metadata"]["managedFields"]
    )

    rc, _, err = await kubectl(
        "create", "-f", "-", stdin=WIDGET.replace("size: 3", "size: 30").replace("w1", "w2")
    )
    assert rc != 0 and "size must not exceed maxSize" in err

    out = await kubectl.ok("delete", "widget", "w1")
    assert 'widget.example.com "w1" deleted' in out
    await kubectl.ok("delete", "-f", str(crd_file))
    rc, _, err = await kubectl("get", "widgets")
    assert rc != 0


async def test_deployment_and_configmap(kubectl: Kubectl, http: Http) -> None:
    out = await kubectl.ok("create", "-f", "-", stdin=CONFIGMAP)
    assert "configmap/settings created" in out
    out = await kubectl.ok("apply", "-f", "-", stdin=DEPLOYMENT)
    assert "deployment.apps/web created" in out
    out = await kubectl.ok(
        "apply", "-f", "-", stdin=DEPLOYMENT.replace("replicas: 2", "replicas: 3")
    )
    assert "deployment.apps/web configured" in out
    dep = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json"))
    assert dep["spec"]["replicas"] == 3 and dep["metadata"]["generation"] == 2

    table = await kubectl.ok("get", "deploy/web", "cm/settings")
    assert "deployment.apps/web   0/3" in table and "configmap/settings   1" in table
    # kubectl-create owns data.mode: changing it by server-side apply needs --force-conflicts.
    rc, _, err = await kubectl(
        "apply", "--server-side", "-f", "-", stdin=CONFIGMAP.replace("fast", "slow")
    )
    assert rc != 0 and 'conflict with "kubectl-create" using v1: .data.mode' in err
    out = await kubectl.ok(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        stdin=CONFIGMAP.replace("fast", "slow"),
    )
    assert "configmap/settings serverside-applied" in out
    cm = yaml.safe_load(await kubectl.ok("get", "configmap", "settings", "-o", "yaml"))
    assert cm["data"] == {"mode": "slow"}

    described = await kubectl.ok("describe", "deployment", "web")
    assert "Replicas:               3 desired" in described and "nginx:1.25" in described

    await http.patch(
        "/apis/apps/v1/namespaces/default/deployments/web/status",
        {
            "status": {
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
                ]
            }
        },
        "application/merge-patch+json",
    )
    await kubectl.ok("wait", "--for=condition=Available", "deployment/web", "--timeout=10s")
    out = await kubectl.ok("delete", "deployment/web", "configmap/settings")
    assert 'deployment.apps "web" deleted' in out and 'configmap "settings" deleted' in out
    status, _, _ = await http.get("/apis/apps/v1/namespaces/default/deployments/web")
    assert status == 404


async def test_server_side_apply_conflict_reported(kubectl: Kubectl) -> None:
    await kubectl.ok("apply", "--server-side", "-f", "-", stdin=CONFIGMAP)
    rc, _, err = await kubectl(
        "apply",
        "--server-side",
        "--field-manager=other",
        "-f",
        "-",
        stdin=CONFIGMAP.replace("fast", "slow"),
    )
    assert rc != 0
    assert "conflict" in err.lower() and ".data.mode" in err
    await kubectl.ok(
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        "-",
        stdin=CONFIGMAP.replace("fast", "slow"),
    )


async def test_kustomize_pipe_apply(kubectl: Kubectl, http: Http, tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "configmap.yaml").write_text(CONFIGMAP)
    (base / "deployment.yaml").write_text(DEPLOYMENT)
    (base / "kustomization.yaml").write_text(
        "resources: [configmap.yaml, deployment.yaml]\nnamePrefix: demo-\nlabels:\n- pairs: "
        "{team: gpu}\n"
    )
    rendered = await kubectl.ok("kustomize", str(base))
    out = await kubectl.ok("apply", "-f", "-", stdin=rendered)
    assert "configmap/demo-settings created" in out and "deployment.apps/demo-web created" in out
    _, dep, _ = await http.get("/apis/apps/v1/namespaces/default/deployments/demo-web")
    assert dep["metadata"]["labels"]["team"] == "gpu"


async def test_get_watch_builtin(kubectl: Kubectl, http: Http) -> None:
    watcher = await _start_watch(kubectl, "get", "configmaps", "-w", "-l", "watch=me")
    assert watcher.stdout is not None
    try:
        await http.post(
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "seen", "labels": {"watch": "me"}}},
        )

        async def saw() -> bool:
            assert watcher.stdout is not None
            line = (await asyncio.wait_for(watcher.stdout.readline(), 10)).decode()
            return line.startswith("seen ")

        await wait_for(saw, timeout=20, what="watched configmap printed")
    finally:
        watcher.kill()
        await watcher.wait()


async def test_imperative_create_commands(kubectl: Kubectl, http: Http) -> None:
    # These generators send protobuf bodies.
    await kubectl.ok("create", "namespace", "team-a")
    await kubectl.ok("create", "configmap", "cfg", "-n", "team-a", "--from-literal=a=1")
    await kubectl.ok("create", "secret", "generic", "pw", "-n", "team-a", "--from-literal=user=x")
    await kubectl.ok("create", "serviceaccount", "robot", "-n", "team-a")
    _, cm, _ = await http.get("/api/v1/namespaces/team-a/configmaps/cfg")
    assert cm["data"] == {"a": "1"}
    _, secret, _ = await http.get("/api/v1/namespaces/team-a/secrets/pw")
    assert secret["data"] == {"user": "eA=="} and secret["type"] == "Opaque"
    status, _, _ = await http.get("/api/v1/namespaces/team-a/serviceaccounts/robot")
    assert status == 200


async def test_imperative_create_of_workloads_rbac_and_budgets(
    kubectl: Kubectl, http: Http
) -> None:
    # Also protobuf bodies: the decoded object must equal what the generator builds as JSON.
    commands = [
        ("deployment", "web", "--image=nginx:1.25", "--port=8080", "--replicas=0"),
        ("job", "once", "--image=busybox", "--", "echo", "hi"),
        ("role", "reader", "--verb=get,list", "--resource=pods,deployments.apps"),
        ("clusterrole", "logs", "--verb=get", "--non-resource-url=/logs/*"),
        ("rolebinding", "rb", "--role=reader", "--user=alice", "--serviceaccount=default:sa"),
        ("clusterrolebinding", "crb", "--clusterrole=logs", "--group=ops"),
        ("poddisruptionbudget", "budget", "--selector=app=web", "--min-available=50%"),
    ]
    for kind, name, *flags in commands:
        offline = await kubectl.ok(
            "create",
            kind,
            name,
            *_before_command(flags),
            "--dry-run=client",
            "-o",
            "json",
            *_command(flags),
        )
        await kubectl.ok("create", kind, name, *flags)
        listed = await kubectl.ok("get", kind, name, "-o", "json")
        assert _subset(json.loads(offline), json.loads(listed)), (kind, offline, listed)
    _, deployment, _ = await http.get("/apis/apps/v1/namespaces/default/deployments/web")
    assert deployment["spec"]["replicas"] == 0  # a pointer field: zero is kept
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    _, job, _ = await http.get("/apis/batch/v1/namespaces/default/jobs/once")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    _, budget, _ = await http.get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/budget")
    assert budget["spec"]["minAvailable"] == "50%"


def _before_command(flags: list[str]) -> list[str]:
    return flags[: flags.index("--")] if "--" in flags else flags


def _command(flags: list[str]) -> list[str]:
    return flags[flags.index("--") :] if "--" in flags else []


def _subset(small: Any, big: Any) -> bool:
    """Every field of ``small`` is in ``big`` (empty values and status aside)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            key == "status" or value in ({}, None) or (key in big and _subset(value, big[key]))
            for key, value in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(small) == len(big)
            and all(_subset(a, b) for a, b in zip(small, big, strict=True))
        )
    return bool(small == big)


async def _first_watch_line(kubectl: Kubectl, *args: str) -> str:
    watcher = await _start_watch(kubectl, "get", *args, "-w", "--output-watch-events")
    assert watcher.stdout is not None
    try:
        header = await asyncio.wait_for(watcher.stdout.readline(), 20)
        first = await asyncio.wait_for(watcher.stdout.readline(), 20)
    finally:
        watcher.kill()
        await watcher.wait()
    return header.decode() + first.decode()


@pytest.mark.slow
async def test_command_matrix(kubectl: Kubectl, http: Http, tmp_path: Path) -> None:
    """create, get -o yaml, get -w, describe, apply (both kinds), wait and delete on a CRD,
    one of its custom resources, a Deployment and a ConfigMap."""
    crd = yaml.safe_dump(WIDGET_CRD)
    cases = [
        (
            "customresourcedefinition",
            "widgets.example.com",
            crd,
            "--for=condition=Established",
            None,
        ),
        (
            "widget",
            "w1",
            WIDGET,
            "--for=condition=Ready",
            "/apis/example.com/v1/namespaces/default/widgets/w1/status",
        ),
        (
            "deployment",
            "web",
            DEPLOYMENT,
            "--for=condition=Available",
            "/apis/apps/v1/namespaces/default/deployments/web/status",
        ),
        ("configmap", "settings", CONFIGMAP, "--for=jsonpath={.data.mode}=fast", None),
    ]
    for kind, name, manifest, condition, status_path in cases:
        ref = f"{kind}/{name}"
        await kubectl.ok("create", "-f", "-", stdin=manifest)
        doc = yaml.safe_load(await kubectl.ok("get", ref, "-o", "yaml"))
        assert doc["metadata"]["name"] == name and doc["metadata"]["uid"]
        assert name in await kubectl.ok("describe", ref)
        watched = await _first_watch_line(kubectl, ref)
        assert (
            watched.split()[0] == "EVENT"
            and f"ADDED    {name}".split() == watched.splitlines()[1].split()[:2]
        )
        if status_path is not None:
            ready = "Available" if kind == "deployment" else "Ready"
            await http.patch(
                status_path,
                {"status": {"conditions": [{"type": ready, "status": "True"}]}},
                "application/merge-patch+json",
            )
        await kubectl.ok("wait", condition, ref, "--timeout=15s")
        labelled = yaml.safe_load(manifest)
        labelled["metadata"].setdefault("labels", {})["applied"] = "client"
        await kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump(labelled))
        labelled["metadata"]["labels"]["applied"] = "server"
        await kubectl.ok(
            "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump(labelled)
        )
        doc = yaml.safe_load(await kubectl.ok("get", ref, "-o", "yaml"))
        assert doc["metadata"]["labels"]["applied"] == "server"
    for kind, name, *_ in reversed(cases):
        out = await kubectl.ok("delete", f"{kind}/{name}")
        assert f'"{name}" deleted' in out
