"""kubectl's habits in ``cdo`` against the API emulator over HTTP: ``-o jsonpath`` printing what
real kubectl prints for the same template and objects, ``-o custom-columns`` and
``--no-headers``, ``cdo wait`` as ``kubectl wait`` (met, met later, timed out, not found), and
``cdo status -w`` printing the report again when the cluster changes."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from cli.jsonpath import jsonpath
from shared.crds import COMPUTE_DOMAINS, install_crds
from shared.kube.client import KubeClient
from sim.kubeapi import KubeServer
from sim.natsserver import free_port
from tests.integration.cli import objects
from tests.integration.cli.conftest import acdo, environment
from tests.integration.cli.objects import A, B, condition

KUBECTL = Path(sys.executable).parent / "kubectl"
TEMPLATES = (
    "{.items[*].metadata.name}",
    '{range .items[*]}{.metadata.name}{"\\t"}'
    '{.metadata.labels.nvidia\\.com/gpu\\.clique}{"\\n"}{end}',
    '{.items[?(@.metadata.name=="b1")].status.capacity}',
    "{.items[0].spec.taints[*].key}",
    '{..conditions[?(@.type=="Ready")].status}',
)


async def set_conditions(client: KubeClient, name: str, conditions: list[dict[str, str]]) -> None:
    """The domain controller's status write: ``status`` Ready when condition Ready is True."""
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    body = {"status": {"status": "Ready" if ready else "NotReady", "conditions": conditions}}
    await client.patch(COMPUTE_DOMAINS, name, body, namespace="ml", subresource="status")


async def cluster(client: KubeClient) -> None:
    await install_crds(client)
    await objects.namespace(client, "ml")
    for name, clique in (("a1", A), ("a2", A), ("b1", B)):
        await objects.node(client, name, clique, fault=name == "a1")
    await objects.domain(
        client,
        "ml",
        "big",
        [
            condition("Ready", "False", "WaitingForPods"),
            condition("Placed", "True", "Placed"),
            condition("Degraded", "False", "Healthy"),
        ],
    )


def args(emulator: KubeServer, tmp_path: Path) -> list[str]:
    nats = f"nats://127.0.0.1:{free_port()}"
    return [
        "--kubeconfig",
        str(emulator.kubeconfig),
        "--nats-url",
        nats,
        "--state-dir",
        str(tmp_path),
    ]


async def kubectl(emulator: KubeServer, *arguments: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(emulator.kubeconfig), *arguments,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.asyncio
async def test_jsonpath_prints_what_kubectl_prints(
    emulator: KubeServer, kube_client: KubeClient
) -> None:
    await cluster(kube_client)
    listed = json.loads(await kubectl(emulator, "get", "nodes", "-o", "json"))
    for template in TEMPLATES:
        theirs = await kubectl(emulator, "get", "nodes", "-o", f"jsonpath={template}")
        assert jsonpath(template, listed) == theirs, template


@pytest.mark.asyncio
async def test_templates_columns_and_no_headers_on_status_and_top(
    emulator: KubeServer, kube_client: KubeClient, tmp_path: Path
) -> None:
    await cluster(kube_client)
    where = args(emulator, tmp_path)
    names = await acdo(
        "status", "-o", 'jsonpath={range .domains[*]}{.name}={.phase}{"\\n"}{end}', *where
    )
    assert (names.code, names.stdout) == (3, "big=Placed\n")  # NATS does not answer: exit 3
    columns = await acdo("status", "-o", "custom-columns=DOMAIN:.name,CHANNEL:.channel", *where)
    assert columns.stdout.splitlines() == ["DOMAIN  CHANNEL", "big     <none>"]
    bare = await acdo("status", "-o", "custom-columns=DOMAIN:.name", "--no-headers", *where)
    assert bare.stdout == "big\n"
    top = await acdo("top", "cliques", "--no-headers", *where)
    assert top.code == 0
    assert [line.split()[0] for line in top.stdout.splitlines() if not line.startswith("note")] == [
        A,
        B,
    ]
    free = await acdo("top", "cliques", "-o", "jsonpath={.cliques[*].gpus_free}", *where)
    assert free.stdout == "4 4"  # as kubectl: no newline of its own
    missing = await acdo("top", "cliques", "-o", "jsonpath={.nope}", *where)
    assert missing.code == 1 and "jsonpath: .nope is not found" in missing.stderr
    status = await acdo("status", "--no-headers", *where)
    assert "DOMAINS" not in status.stdout and "NAMESPACE" not in status.stdout
    assert status.stdout.startswith("ml ")


@pytest.mark.asyncio
async def test_wait_behaves_as_kubectl_wait(
    emulator: KubeServer, kube_client: KubeClient, tmp_path: Path
) -> None:
    await cluster(kube_client)
    where = [*args(emulator, tmp_path), "-n", "ml"]
    met = await acdo("wait", "big", "--for=condition=Placed", *where)
    assert (met.code, met.stdout) == (0, "computedomain.resource.nvidia.com/big condition met\n")
    timed_out = await acdo("wait", "computedomain/big", "--timeout=1s", *where)
    assert timed_out.code == 1
    assert timed_out.stderr == "cdo: timed out waiting for the condition on computedomains/big\n"
    missing = await acdo("wait", "nope", *where)
    assert missing.code == 1 and '"nope" not found' in missing.stderr
    gone = await acdo("wait", "nope", "--for=delete", *where)
    assert (gone.code, gone.stdout) == (0, "computedomain.resource.nvidia.com/nope deleted\n")

    # Ready later: the wait ends when the controller's status says so.
    waiting = asyncio.create_task(acdo("wait", "big", "--timeout=60s", *where))
    await set_conditions(
        kube_client,
        "big",
        [condition("Ready", "True", "AllMembersReady"), condition("Placed", "True", "Placed")],
    )
    ready = await waiting
    assert (ready.code, ready.stdout) == (
        0,
        "computedomain.resource.nvidia.com/big condition met\n",
    )
    assert (await acdo("wait", "big", "--for=jsonpath={.status.status}=Ready", *where)).code == 0


@pytest.mark.asyncio
async def test_status_watch_prints_the_report_again_when_it_changes(
    emulator: KubeServer, kube_client: KubeClient, tmp_path: Path
) -> None:
    await cluster(kube_client)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "status", "-w", "-o", "jsonpath={.domains[*].phase}",
        *args(emulator, tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment(),
    )  # fmt: skip
    assert process.stdout is not None
    try:
        lines: list[str] = []

        stdout = process.stdout

        async def next_report() -> str:
            line: bytes = await asyncio.wait_for(stdout.readline(), 30)
            lines.append(line.decode().rstrip("\n"))
            return lines[-1]

        assert await next_report() == "Placed"
        # The unreachable NATS is a line of the report, and the watch goes on.
        assert (await next_report()).startswith("cdo: NATS at")
        await set_conditions(
            kube_client,
            "big",
            [condition("Placed", "True", "Placed"), condition("Degraded", "True", "NodeFault")],
        )
        while await next_report() != "Degraded":  # each read is bounded (30 s)
            pass
        assert lines[-2].startswith("-- ")  # the time above the new report
    finally:
        process.send_signal(signal.SIGINT)
        await process.wait()
    assert process.returncode == 130


@pytest.mark.asyncio
async def test_top_cliques_watch_prints_the_table_again_when_capacity_changes(
    emulator: KubeServer, kube_client: KubeClient, tmp_path: Path
) -> None:
    await cluster(kube_client)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "top", "cliques", "-w",
        "-o", "jsonpath={.cliques[*].gpus_free}", *args(emulator, tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment(),
    )  # fmt: skip
    assert process.stdout is not None
    stdout = process.stdout
    try:

        async def next_report() -> str:
            line: bytes = await asyncio.wait_for(stdout.readline(), 30)
            return line.decode().rstrip("\n")

        assert await next_report() == "4 4"
        # A fourth tray joins clique B: its four GPUs are free.
        await objects.node(kube_client, "b2", B, fault=False)
        while (report := await next_report()) != "4 8":  # each read is bounded (30 s)
            assert report.startswith("-- ") or report == "4 4", report
    finally:
        process.send_signal(signal.SIGINT)
        await process.wait()
    assert process.returncode == 130
