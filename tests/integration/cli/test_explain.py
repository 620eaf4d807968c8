"""``cdo explain`` and ``cdo top cliques`` against the API emulator, with hand-made objects in
the shapes the services write them: a gang that waits, a domain that is Degraded, one pod of it,
and the capacity of the cliques from the nodes or from the NATS snapshots."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from shared.crds import install_crds
from shared.events import CliqueCapacity, ImexPeer, NodeImexState
from shared.kube.client import KubeClient
from sim.kubeapi import KubeServer
from sim.natsserver import NatsServer, free_port
from tests.conftest import BusFactory
from tests.integration.cli import objects
from tests.integration.cli.conftest import Result, acdo
from tests.integration.cli.objects import A, B, condition
from tests.support.wait import wait_for


def connection(emulator: KubeServer, tmp_path: Path, nats: str = "") -> list[str]:
    return [
        "--kubeconfig",
        str(emulator.kubeconfig),
        "--nats-url",
        nats or f"nats://127.0.0.1:{free_port()}",
        "--state-dir",
        str(tmp_path),
    ]


async def run(emulator: KubeServer, tmp_path: Path, *args: str, nats: str = "") -> Result:
    return await acdo(*args, *connection(emulator, tmp_path, nats))


@pytest.fixture
async def waiting(kube_client: KubeClient) -> KubeClient:
    """ml/big: four pods wait (CliqueFull for two, PodConstraints for two); four nodes in two
    cliques, one with a fault taint."""
    await install_crds(kube_client)
    await objects.namespace(kube_client, "ml")
    await objects.node(kube_client, "a1", A)
    await objects.node(kube_client, "a2", A, fault=True, gpu=("False", "GpuFault"))
    await objects.node(kube_client, "b1", B)
    await objects.node(kube_client, "b2", B, gpus=8)
    await objects.domain(
        kube_client,
        "ml",
        "big",
        [
            condition("Ready", "False", "WaitingForPlacement"),
            condition("Placed", "False", "WaitingForPlacement"),
            condition("Degraded", "False", "NotPlaced"),
        ],
    )
    full = ("False", "CliqueFull", "slice 0 must grow by 2 pods; clique A has 1 free node")
    picky = (
        "False",
        "PodConstraints",
        "node selector zone=west rules out b1, b2; a2 has a taint the pods do not tolerate",
    )
    for index, placed in enumerate((full, full, picky, picky)):
        await objects.pod(kube_client, "ml", f"big-{index}", domain="big", gated=True,
                          placed=placed)  # fmt: skip
    await objects.event(
        kube_client, "ml", kind="ComputeDomain", name="big", reason="CliqueFull",
        message="slice 0 must grow by 2 pods",
    )  # fmt: skip
    await objects.event(
        kube_client, "ml", kind="ComputeDomain", name="another", reason="FailoverBlocked",
        message="another domain's trouble",
    )  # fmt: skip
    return kube_client


@pytest.fixture
async def degraded(kube_client: KubeClient) -> KubeClient:
    """ml/train: placed on a1, a2 of clique A; a2 faulted with IMEX not ready; one pod's claim
    refused by the IMEX agent; a slice stuck."""
    await install_crds(kube_client)
    await objects.namespace(kube_client, "ml")
    await objects.node(kube_client, "a1", A)
    await objects.node(
        kube_client, "a2", A, fault=True, imex=("False", "DaemonNotReady"),
        gpu=("False", "GpuFault"),
    )  # fmt: skip
    await objects.node(kube_client, "b1", B)
    await objects.domain(
        kube_client,
        "ml",
        "train",
        [
            condition("Ready", "False", "NodeFault", "node a2 has fault taint cdo.dev/gpu-fault"),
            condition("Placed", "True", "Placed", "2 pods on 2 nodes of clique A"),
            condition("Degraded", "True", "NodeFault", "node a2 has fault taint cdo.dev/gpu-fault"),
        ],
    )
    await objects.placement(
        kube_client, "ml", "train", members={"a1": ["train-0"], "a2": ["train-1"]},
        waiting_since="2026-05-01T11:30:00Z",
    )  # fmt: skip
    await objects.pod(kube_client, "ml", "train-0", domain="train", node="a1",
                      placed=("True", "Placed", "pinned to node a1"))  # fmt: skip
    await objects.pod(kube_client, "ml", "train-1", domain="train", node="a2",
                      placed=("True", "Placed", "pinned to node a2"))  # fmt: skip
    await objects.event(
        kube_client, "ml", kind="Pod", name="train-1", reason="FailedPrepareDynamicResources",
        message="prepare claim ml/train-1-imex: refused (PinnedElsewhere): pod train-1 is "
        "pinned to node a1 for ComputeDomain ml/train, not to node a2",
    )  # fmt: skip
    await objects.event(
        kube_client, "ml", kind="ComputeDomain", name="train", reason="SliceStuck",
        message="slice 0 cannot be made whole in clique A: node a2 faulted",
        when="2026-05-01T11:30:00Z",
    )  # fmt: skip
    return kube_client


async def test_a_waiting_gang_says_why_per_reason_and_shows_capacity(
    waiting: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    result = await run(emulator, tmp_path, "explain", "big", "-n", "ml")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert out.startswith("computedomain ml/big: Pending\n")
    assert "! CliqueFull (pods big-0, big-1): a slice the domain holds must grow" in out
    assert "! PodConstraints (pods big-2, big-3): the GPUs exist, but the pods' own" in out
    assert "node selector zone=west rules out b1, b2" in out
    assert "! WaitingForPlacement (condition Ready)" in out
    assert "4 pods still gated" in out
    # Capacity computed from the nodes (NATS does not answer): a2 is tainted, b2 has 8 GPUs.
    cliques = {
        line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  9e")
    }
    assert cliques[A][1:3] == ["1/2", "4/8"]
    assert cliques[B][1:4] == ["2/2", "12/12", "8"]
    assert "note: NATS at" in out and "capacity computed from the nodes" in out
    assert "Warning  CliqueFull  ComputeDomain/big" in out
    assert "another domain's trouble" not in out


async def test_json_and_yaml_carry_the_same_findings(
    waiting: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    as_json = await run(emulator, tmp_path, "explain", "computedomain/big", "-n", "ml", "-o",
                        "json")  # fmt: skip
    assert as_json.code == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    reasons = [(f["topic"], f["reason"]) for f in document["findings"] if f["problem"]]
    assert ("placement", "CliqueFull") in reasons and ("placement", "PodConstraints") in reasons
    assert {c["source"] for c in document["cliques"]} == {"nodes"}
    as_yaml = await run(emulator, tmp_path, "explain", "big", "-n", "ml", "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout)["findings"] == document["findings"]
    named = await run(emulator, tmp_path, "explain", "big", "-n", "ml", "-o", "name")
    assert named.stdout == "computedomain/ml/big\n"


async def test_a_degraded_domain_shows_faults_imex_refusals_and_the_stuck_slice(
    degraded: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    result = await run(emulator, tmp_path, "explain", "train", "-n", "ml")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert out.startswith("computedomain ml/train: Degraded\n")
    assert "  NodeFault: a member node carries the cdo.dev/gpu-fault taint" in out
    assert "! SliceStuck (event on the domain)" in out
    assert "! PinnedElsewhere (pod train-1): the pod runs on another node" in out
    assert "! DaemonNotReady (node a2)" in out
    assert "! GpuFault (node a2)" in out
    slice_row = next(line for line in out.splitlines() if line.startswith("  0 "))
    assert slice_row.split()[1:5] == [A, "3", "0-1", "2/2"]
    assert "SliceStuck" in slice_row
    node_row = next(line for line in out.splitlines() if line.startswith("  a2 "))
    assert "cdo.dev/gpu-fault=xid-79:NoExecute" in node_row
    assert "False (DaemonNotReady)" in node_row


async def test_the_pod_form_explains_that_pod_only(
    degraded: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    result = await run(emulator, tmp_path, "explain", "pod/train-1", "-n", "ml")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert out.startswith("pod ml/train-1 (of computedomain ml/train)")
    assert "PinnedElsewhere" in out and "GpuFault (node a2)" in out
    assert "node a1" not in out.split("EVENTS")[0].split("NODES")[1]
    other = await run(emulator, tmp_path, "explain", "pod/train-0", "-n", "ml")
    assert "PinnedElsewhere" not in other.stdout


async def test_namespaces_all_namespaces_and_context(
    degraded: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    wrong = await run(emulator, tmp_path, "explain", "train", "-n", "other")
    assert wrong.code == 1 and "ComputeDomain other/train not found" in wrong.stderr
    found = await run(emulator, tmp_path, "explain", "train", "-A")
    assert found.code == 0 and found.stdout.startswith("computedomain ml/train:")
    default = await run(emulator, tmp_path, "explain", "train")
    assert default.code == 1 and "ComputeDomain default/train not found" in default.stderr
    # A context whose namespace is ml: chosen with --context, then its namespace applies.
    config = yaml.safe_load(await asyncio.to_thread(Path(emulator.kubeconfig).read_text))
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["contexts"].append({"name": "ml", "context": {**current["context"], "namespace": "ml"}})
    copied = tmp_path / "kubeconfig-ml"
    await asyncio.to_thread(copied.write_text, yaml.safe_dump(config))
    base = ["--kubeconfig", str(copied), "--nats-url", f"nats://127.0.0.1:{free_port()}"]
    via = await acdo("explain", "train", "--context", "ml", *base, "--state-dir", str(tmp_path))
    assert via.code == 0, via.stderr
    unknown = await acdo("explain", "train", "--context", "nope", *base)
    assert unknown.code == 3 and "nope" in unknown.stderr


async def test_top_cliques_from_the_nodes_when_nats_has_nothing(
    waiting: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    result = await run(emulator, tmp_path, "top", "cliques")
    assert result.code == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:3]}
    assert rows[A][1:4] == ["1/2", "4/8", "50%"]
    assert rows[B][5] == "-"  # channels: the allocator's to count
    wide = await run(emulator, tmp_path, "top", "cliques", "-o", "wide")
    assert wide.stdout.splitlines()[0].split()[-3:] == ["DOMAINS", "SOURCE", "AGE"]
    names = await run(emulator, tmp_path, "top", "cliques", "-o", "name")
    assert names.stdout.splitlines() == [f"clique/{A}", f"clique/{B}"]


async def test_snapshots_on_nats_give_capacity_and_imex_state(
    degraded: KubeClient,
    emulator: KubeServer,
    nats_server: NatsServer,
    bus_factory: BusFactory,
    tmp_path: Path,
) -> None:
    bus = await bus_factory("allocator")
    await bus.publish(
        CliqueCapacity(
            clique=A, gpus_total=8, gpus_free=0, nodes_total=2, nodes_healthy=1,
            largest_free_block=0, domains=1, channels_free=2046,
        )
    )  # fmt: skip
    await bus.publish(
        NodeImexState(
            node="a1", clique=A, daemon_state="READY", domain_state="DEGRADED",
            peers=(ImexPeer(node="a2", state="INVALID"),),
        )
    )  # fmt: skip
    await bus.flush()
    await wait_for(lambda: _two_snapshots(bus), what="the two snapshots")
    top = await run(emulator, tmp_path, "top", "cliques", "-o", "json", nats=nats_server.url)
    assert top.code == 0, top.stderr
    rows = {row["clique"]: row for row in json.loads(top.stdout)["cliques"]}
    assert (rows[A]["source"], rows[A]["channels_free"]) == ("snapshot", 2046)
    assert rows[B]["source"] == "nodes"
    result = await run(emulator, tmp_path, "explain", "train", "-n", "ml", nats=nats_server.url)
    assert "! DEGRADED (node a1): some members' daemons are not READY" in result.stdout
    assert "0/1 peers connected" in result.stdout
    assert "note:" not in result.stdout


async def _two_snapshots(bus: object) -> bool | None:
    from shared.bus import EventBus

    assert isinstance(bus, EventBus)
    found = await bus.snapshots()
    return True if len(found) >= 2 else None


async def test_status_filters_by_namespace_and_prints_each_format(
    degraded: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    await objects.domain(degraded, "default", "other", [])
    every = await run(emulator, tmp_path, "status", "-o", "name")
    assert every.stdout.splitlines() == [
        "computedomain.resource.nvidia.com/other",
        "computedomain.resource.nvidia.com/train",
    ]
    assert every.code == 3  # NATS does not answer: said after what the API gave
    one = await run(emulator, tmp_path, "status", "-n", "ml", "-o", "yaml")
    assert [d["name"] for d in yaml.safe_load(one.stdout)["domains"]] == ["train"]
    wide = await run(emulator, tmp_path, "status", "-o", "wide", "-A")
    assert "SLICES  PODS RUNNING  NODES" in wide.stdout
