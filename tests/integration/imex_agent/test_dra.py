"""The agent's DRA kubelet plugin over gRPC: slices, channels, CDI specs, isolation.

One node of a clique with its agent (and its own simulated IMEX daemon), the API emulator with
cdo's CRDs, and the kubelet's side of the plugin protocol (shared.kubeletapi.PluginWatcher)
calling NodePrepareResources / NodeUnprepareResources over the unix sockets. Placements have the
slice shape unless a test says otherwise; each claim's pod is seated on the node first.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.imex_agent import ImexAgent
from shared.crds import PLACEMENTS, Placement
from shared.crds.names import DOMAIN_LABEL, DOMAIN_UID_LABEL, DRIVER_NAME
from shared.kube.models import ResourceSlice
from shared.kube.resources import RESOURCE_SLICES
from shared.kubeletapi import Claim, DraPluginClient
from tests.integration.imex_agent.harness import (
    MAJOR,
    Domain,
    ImexCluster,
    SimNode,
    create_claim,
    create_domain,
    one_slice,
    pod_uid,
    without_nulls,
)
from tests.support.wait import wait_for
from tests.unit.imex_agent.cdi_schema import CDI_SPEC_0_6


class Node:
    """One running agent and the kubelet's client of its plugin."""

    def __init__(self, cluster: ImexCluster, sim: SimNode, plugin: DraPluginClient) -> None:
        self.cluster = cluster
        self.sim = sim
        self.plugin = plugin

    @property
    def agent(self) -> ImexAgent:
        assert self.sim.agent is not None
        return self.sim.agent

    @property
    def clique(self) -> str:
        return self.sim.topology.clique

    def spec(self, claim: Claim) -> dict[str, Any]:
        path = self.sim.cdi_root / f"cdo.dev-imex-channel_{claim.uid}.json"
        document: dict[str, Any] = json.loads(path.read_text())
        return document

    def env(self, claim: Claim) -> dict[str, str]:
        (device,) = self.spec(claim)["devices"]
        pairs = (item.partition("=") for item in device["containerEdits"]["env"])
        return {key: value for key, _, value in pairs}

    def channels(self) -> set[int]:
        root = self.sim.device_root
        return {int(p.name.removeprefix("channel")) for p in root.glob("channel*")}


@pytest.fixture
async def node(cluster: ImexCluster) -> Node:
    """The first node with its agent running (the cluster fixture stops it)."""
    sim = cluster.node_list()[0]
    await cluster.register(sim)
    await cluster.start(sim)
    plugin = await cluster.plugin(sim)
    return Node(cluster, sim, plugin)


async def prepare(node: Node, *claims: Claim) -> dict[str, Any]:
    results = await node.plugin.prepare(list(claims))
    return dict(results)


async def test_node_publishes_its_attachment_devices(node: Node) -> None:
    client = node.cluster.client

    async def published() -> ResourceSlice | None:
        raw = await client.get_or_none(RESOURCE_SLICES, f"{node.sim.name}-{DRIVER_NAME}")
        return None if raw is None else msgspec.json.decode(raw, type=ResourceSlice)

    resource_slice = await wait_for(published, timeout=10, what="the node's ResourceSlice")
    spec = resource_slice.spec
    assert (spec.driver, spec.node_name, spec.pool.name) == (
        DRIVER_NAME,
        node.sim.name,
        node.sim.name,
    )
    assert [device.name for device in spec.devices] == [f"attach-{i}" for i in range(4)]
    assert {device.attributes["clique"].string for device in spec.devices} == {node.clique}
    owner = resource_slice.metadata.owner_references[0]
    assert (owner.kind, owner.name) == ("Node", node.sim.name)


async def test_readiness_needs_imex_ready_and_the_plugin_registered(node: Node) -> None:
    await wait_for(lambda: node.agent.ready, timeout=20, what="agent ready")
    assert node.agent.plugin.registered
    assert node.agent.reporter.ready


async def test_two_domains_on_one_node_get_different_channels(node: Node) -> None:
    client = node.cluster.client
    a = await create_domain(client, namespace="team", name="a", channel=5, clique=node.clique)
    b = await create_domain(client, namespace="team", name="b", channel=9, clique=node.clique)
    a1 = await create_claim(client, namespace="team", name="a-1", domain=a, node=node.sim.name)
    a2 = await create_claim(
        client, namespace="team", name="a-2", domain=a, node=node.sim.name, device="attach-1"
    )
    b1 = await create_claim(
        client, namespace="team", name="b-1", domain=b, node=node.sim.name, device="attach-2"
    )
    results = await prepare(node, a1, a2, b1)
    assert all(result.ok for result in results.values()), results
    ids = {uid: result.cdi_device_ids for uid, result in results.items()}
    assert len({ids[a1.uid], ids[a2.uid], ids[b1.uid]}) == 3
    assert [d.device_name for d in results[b1.uid].devices] == ["attach-2"]
    assert [d.pool_name for d in results[b1.uid].devices] == [node.sim.name]

    def channel_of(claim: Claim) -> int:
        (device,) = node.spec(claim)["devices"]
        (device_node,) = device["containerEdits"]["deviceNodes"]
        return int(device_node["minor"])

    assert [channel_of(a1), channel_of(a2), channel_of(b1)] == [5, 5, 9]
    assert node.channels() == {5, 9}
    assert (node.sim.device_root / "channel9").read_text() == f"c {MAJOR}:9\n"
    env = node.env(b1)
    assert (env["CDO_COMPUTE_DOMAIN"], env["CDO_IMEX_CHANNEL"]) == ("team/b", "9")
    assert (env["CLIQUE_ID"], env["COMPUTE_DOMAIN_UUID"]) == (node.clique, b.uid)
    # a-1 and a-2 were seated in that order: ranks 0 and 1 of domain a's one slice.
    assert [node.env(c)["CDO_RANK"] for c in (a1, a2, b1)] == ["0", "1", "0"]

    # A channel stays while any claim of its domain on the node needs it.
    assert all(r.ok for r in (await node.plugin.unprepare([a1])).values())
    assert node.channels() == {5, 9}
    assert not (node.sim.cdi_root / f"cdo.dev-imex-channel_{a1.uid}.json").exists()
    assert all(r.ok for r in (await node.plugin.unprepare([a2, b1])).values())
    assert node.channels() == set()
    assert list(node.sim.cdi_root.iterdir()) == []


async def test_cdi_spec_files_carry_every_field_cdi_requires(node: Node) -> None:
    client = node.cluster.client
    domain = await create_domain(client, namespace="ml", name="d", channel=3, clique=node.clique)
    claim = await create_claim(client, namespace="ml", name="c", domain=domain, node=node.sim.name)
    (result,) = (await prepare(node, claim)).values()
    assert result.ok, result.error
    document = node.spec(claim)
    jsonschema.validate(document, CDI_SPEC_0_6)
    assert result.cdi_device_ids == (f"{document['kind']}={document['devices'][0]['name']}",)
    (device_node,) = document["devices"][0]["containerEdits"]["deviceNodes"]
    assert device_node["path"] == "/dev/nvidia-caps-imex-channels/channel3"
    assert Path(device_node["hostPath"]) == node.sim.device_root / "channel3"
    assert (device_node["type"], device_node["major"], device_node["minor"]) == ("c", MAJOR, 3)


async def test_prepare_twice_returns_the_same_cdi_ids(node: Node) -> None:
    client = node.cluster.client
    domain = await create_domain(client, namespace="ml", name="d", channel=11, clique=node.clique)
    claim = await create_claim(client, namespace="ml", name="c", domain=domain, node=node.sim.name)
    first = await prepare(node, claim)
    second = await prepare(node, claim)
    assert first == second
    assert first[claim.uid].ok
    assert node.channels() == {11}
    assert all(r.ok for r in (await node.plugin.unprepare([claim])).values())
    assert all(r.ok for r in (await node.plugin.unprepare([claim])).values())
    assert node.channels() == set()


async def test_claim_from_another_namespace_is_refused(node: Node) -> None:
    client = node.cluster.client
    domain = await create_domain(
        client, namespace="team-a", name="train", channel=4, clique=node.clique
    )
    # A claim in team-b that names team-a's domain (by name and uid).
    intruder = await create_claim(
        client, namespace="team-b", name="steal", domain=domain, node=node.sim.name, seat=False
    )
    (result,) = (await prepare(node, intruder)).values()
    assert not result.ok
    assert "another namespace" in result.error
    # Same name in its own namespace, but made for the other domain's uid: refused too.
    await create_domain(client, namespace="team-b", name="train", channel=6, clique=node.clique)
    cross = await create_claim(
        client,
        namespace="team-b",
        name="cross",
        domain=None,
        node=node.sim.name,
        labels={DOMAIN_LABEL: "train", DOMAIN_UID_LABEL: domain.uid},
    )
    (result,) = (await prepare(node, cross)).values()
    assert not result.ok
    assert node.channels() == set()
    assert list(node.sim.cdi_root.glob("*.json")) == []


async def test_claims_that_cannot_be_served_are_refused_with_the_reason(node: Node) -> None:
    client = node.cluster.client
    elsewhere = await create_domain(
        client,
        namespace="ml",
        name="far",
        channel=1,
        clique="00000000-0000-0000-0000-000000000001.1",
    )
    far = await create_claim(
        client, namespace="ml", name="far", domain=elsewhere, node=node.sim.name
    )
    plain = await create_claim(
        client, namespace="ml", name="plain", domain=None, node=node.sim.name, labels={}
    )
    here = await create_domain(client, namespace="ml", name="here", channel=2, clique=node.clique)
    # Made by hand with the domain's labels, for a pod the allocator never placed.
    copied = await create_claim(
        client, namespace="ml", name="copied", domain=here, node=node.sim.name, seat=False
    )
    unreserved = await create_claim(
        client, namespace="ml", name="unreserved", domain=here, node=node.sim.name, reserve=False
    )
    results = await prepare(node, far, plain, copied, unreserved)
    assert results[far.uid].error == (
        "refused (OtherClique): "
        "pod far-pod is placed in slice 0 of ComputeDomain ml/far, which is in clique "
        f"'00000000-0000-0000-0000-000000000001.1'; node {node.sim.name} is in clique "
        f"'{node.clique}'"
    )
    assert "not made from a ComputeDomain's claim template" in results[plain.uid].error
    assert results[copied.uid].error == (
        "refused (NotPinned): "
        "pod copied-pod (uid uid-copied-pod) is not a member of ComputeDomain ml/here: the "
        "allocator pinned no pod of that name for it, so ResourceClaim ml/copied gets no "
        f"channel on node {node.sim.name}"
    )
    assert "is reserved for no pod" in results[unreserved.uid].error
    assert node.channels() == set()
    assert list(node.sim.cdi_root.glob("*.json")) == []


async def test_a_pod_gets_the_channel_and_ranks_of_its_slice(node: Node) -> None:
    """Slice 0 (ranks 0-1) in another clique, slice 1 (ranks 2-3) on this node."""
    client = node.cluster.client
    far_clique = "00000000-0000-0000-0000-000000000001.1"
    first = one_slice(clique=far_clique, channel=30)
    first |= {
        "size": 2,
        "members": [
            {
                "node": "far-0",
                "slot": 0,
                "gpus": 2,
                "pods": [
                    {"name": "w-0", "rank": 0, "uid": pod_uid("w-0")},
                    {"name": "w-1", "rank": 1, "uid": pod_uid("w-1")},
                ],
            }
        ],
    }
    second = one_slice(clique=node.clique, channel=31, index=1, first_rank=2)
    domain = await create_domain(
        client,
        namespace="ml",
        name="wide",
        channel=31,
        clique=node.clique,
        slices=[first, second],
    )
    w2 = await create_claim(
        client, namespace="ml", name="w-2-c", domain=domain, node=node.sim.name, pod="w-2"
    )
    w3 = await create_claim(
        client,
        namespace="ml",
        name="w-3-c",
        domain=domain,
        node=node.sim.name,
        pod="w-3",
        device="attach-1",
    )
    # w-0 is seated on far-0; a claim for it allocated here gets nothing.
    w0 = await create_claim(
        client,
        namespace="ml",
        name="w-0-c",
        domain=domain,
        node=node.sim.name,
        pod="w-0",
        device="attach-2",
    )
    results = await prepare(node, w2, w3, w0)
    assert results[w2.uid].ok and results[w3.uid].ok, results
    assert "is pinned to node far-0" in results[w0.uid].error
    assert node.channels() == {31}
    expected = {
        "CDO_COMPUTE_DOMAIN": "ml/wide",
        "CDO_COMPUTE_DOMAIN_UID": domain.uid,
        "CDO_IMEX_CHANNEL": "31",
        "CDO_CLIQUE_ID": node.clique,
        "CDO_SLICE_INDEX": "1",
        "CDO_SLICE_SIZE": "2",
        "CDO_SLICE_RANK": "1",
        "CDO_RANK": "3",
        "CLIQUE_ID": node.clique,
        "COMPUTE_DOMAIN_UUID": domain.uid,
        "COMPUTE_DOMAIN_NAME": "wide",
        "COMPUTE_DOMAIN_NAMESPACE": "ml",
    }
    assert node.env(w3) == expected
    assert node.env(w2) == expected | {"CDO_SLICE_RANK": "0", "CDO_RANK": "2"}


async def test_an_old_shape_placement_grants_once_the_allocator_records_uids(
    node: Node,
) -> None:
    """A Placement the previous release wrote (one clique, pods as plain names) does not say
    which pod holds a seat: its claims are refused, retriably, until the record has the pods'
    uids (the allocator writes them, in the slice shape, at its next reconcile)."""
    client = node.cluster.client
    domain = await create_domain(
        client, namespace="ml", name="old", channel=14, clique=node.clique, legacy=True
    )
    claims = [
        await create_claim(
            client,
            namespace="ml",
            name=f"old-{index}",
            domain=domain,
            node=node.sim.name,
            device=f"attach-{index}",
        )
        for index in range(2)
    ]
    results = await prepare(node, *claims)
    assert all("without a uid" in result.error for result in results.values()), results
    assert node.channels() == set()
    # What the allocator writes for that record: the one slice, ranks in slot order then by
    # pod name, each seat with its pod's uid.
    spec = msgspec.json.decode(
        await client.get(PLACEMENTS, "old", namespace="ml"), type=Placement
    ).spec
    (piece,) = spec.all_slices
    members = [
        msgspec.structs.replace(
            member,
            pods=tuple(msgspec.structs.replace(p, uid=pod_uid(p.name)) for p in member.pods),
        )
        for member in piece.members
    ]
    rewritten = msgspec.structs.replace(piece, members=tuple(members))
    await client.patch(
        PLACEMENTS,
        "old",
        {
            "spec": {
                "clique": None,
                "channel": None,
                "members": None,
                "slices": [without_nulls(msgspec.to_builtins(rewritten))],
            }
        },
        namespace="ml",
    )
    results = await prepare(node, *claims)  # the kubelet's retry
    assert all(result.ok for result in results.values()), results
    assert node.channels() == {14}
    assert [node.env(claim)["CDO_RANK"] for claim in claims] == ["0", "1"]
    assert {node.env(claim)["CDO_SLICE_SIZE"] for claim in claims} == {"2"}
    assert {node.env(claim)["CLIQUE_ID"] for claim in claims} == {node.clique}


# -- isolation, as a property -------------------------------------------------------------------

_RUNS = itertools.count()
assignments = st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=8)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(owners=assignments, seed=st.integers(0, 2**16))
async def test_a_pod_of_one_domain_never_gets_another_domains_channel(
    node: Node, owners: list[int], seed: int
) -> None:
    """Claims spread at random over four domains (some sharing a name across namespaces)."""
    client = node.cluster.client
    rng = random.Random(seed)
    run = f"p{next(_RUNS)}"  # each example in namespaces of its own
    channels = rng.sample(range(2048), 4)
    domains: list[Domain] = []
    for index, channel in enumerate(channels):
        namespace = f"{run}-ns{index % 2}"
        domains.append(
            await create_domain(
                client,
                namespace=namespace,
                name=f"d{index // 2}",
                channel=channel,
                clique=node.clique,
            )
        )
    claims: list[tuple[Claim, Domain]] = []
    for index, owner in enumerate(owners):
        domain = domains[owner]
        claim = await create_claim(
            client,
            namespace=domain.namespace,
            name=f"c{index}",
            domain=domain,
            node=node.sim.name,
            device=f"attach-{index % 4}",
        )
        claims.append((claim, domain))
    rng.shuffle(claims)
    results = await prepare(node, *(claim for claim, _ in claims))
    ranks: dict[str, list[int]] = {}
    for claim, domain in claims:
        assert results[claim.uid].ok, results[claim.uid].error
        (device,) = node.spec(claim)["devices"]
        minors = {n["minor"] for n in device["containerEdits"]["deviceNodes"]}
        assert minors == {domain.channel}
        env = node.env(claim)
        assert env["CDO_COMPUTE_DOMAIN"] == f"{domain.namespace}/{domain.name}"
        assert env["COMPUTE_DOMAIN_UUID"] == domain.uid
        ranks.setdefault(domain.uid, []).append(int(env["CDO_RANK"]))
    # Each domain's pods have the distinct ranks its Placement gave them, from 0.
    assert all(sorted(seen) == list(range(len(seen))) for seen in ranks.values())
    assert node.channels() == {domain.channel for _, domain in claims}
    assert all(r.ok for r in (await node.plugin.unprepare([c for c, _ in claims])).values())
    assert node.channels() == set()
