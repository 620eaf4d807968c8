"""Red team: every attack of docs/security.md tried on the whole system, as an attacker would.

One system with NATS identities (``cdo sim up --nats-auth``) and RBAC enforced; one victim
domain (two pods of four GPUs, one per node) runs throughout, in namespace ``victim``. The
attacker is a tenant of namespace ``attacker``, a ServiceAccount granted write on Placements
in the victim's namespace, and a node whose cdo identities (its IMEX agent's and health
monitor's API tokens and NATS tokens, as the node host issued them) it holds. Each case:

- the attack is refused, and the refusal names what refused it (the admission webhook, the
  ValidatingAdmissionPolicy, or the NATS permission);
- the victim's workload keeps running and its domain is Ready (where the attack targets
  scheduling, the victim's pod on the node is deleted and its replacement must start there);
- the attempt is visible: the webhook's ``cdo_admissions_total{result="refused"}`` counter and
  the attacker's PodScheduled condition, a line of the API server's audit log (the policies'
  ``Audit`` action), or the nats-server's permissions-violation log line naming the identity.

The cases, by docs/security.md's table: (a) attack 1, (b) 2, (c) 3, (d) 4, (e) 5, (f) 8 and 9.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
import pytest_asyncio
from nats.js import api

from shared.bus.token import TokenFile
from shared.crds import PLACEMENTS
from shared.crds.names import CHANNEL_DEVICE_CLASS, GPU_DRA_DRIVER, HOSTNAME_LABEL
from shared.events import subjects
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Pod
from shared.kube.resources import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES
from sim.control.natsauth import READER_ACCOUNT, READER_NAMESPACE
from sim.control.state import AUDIT_LOG_FILE, IDENTITIES_DIR
from sim.identities import (
    HEALTH_MONITOR_SA,
    IMEX_AGENT_SA,
    NAMESPACE,
    nats_token_path,
    request_token,
    write_kubeconfig,
)
from tests.e2e.test_system_isolation import claim_of, forged_claim, intruder_pod
from tests.e2e.test_system_metrics import fetch_allocator, samples, value
from tests.e2e.test_system_nats_identities import refused_publish
from tests.e2e.whole_system import (
    SYSTEM_STEP_S,
    WholeSystem,
    live,
    running_whole_system,
)
from tests.support.natsviolations import Violations
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

VICTIM = "victim"
ATTACKER = "attacker"
NAME = "train"
STREAM = "CDO"
ALLOCATION_WEBHOOK = "channel-allocation.clique-allocator.cdo.dev"
ATTACHMENT_DEVICES_PER_NODE = 8
"""Two per GPU on the simulated four-GPU nodes: the attacker asks for all of them."""
API_TIMEOUT_S = 0.5
"""A refused JetStream call gets no answer: the client gives up after this."""


@dataclass
class Victim:
    pods: list[Pod]
    channel: int

    @property
    def nodes(self) -> list[str]:
        return sorted(pod.spec.node_name for pod in self.pods)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    # The attacks use the nodes' cdo identities: what RBAC lets them try is no grant the
    # services need, so this system's record stays out of test_used_grants.py's.
    async with running_whole_system(nats_auth=True, count_grants=False) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def victim(system: WholeSystem) -> AsyncIterator[Victim]:
    """The victim's domain, Ready on two nodes; both namespaces cleaned up at the end."""
    for namespace in (VICTIM, ATTACKER):
        await system.create_namespace(namespace)
    await system.create_workload(VICTIM, NAME, replicas=2, gpus=4)
    pods = await system.wait_running(VICTIM, f"app={NAME}", 2)
    domain = await system.wait_domain_ready(VICTIM, NAME, nodes=2)
    assert domain.status.channel is not None
    yield Victim(pods=pods, channel=domain.status.channel)
    # The attacker's bare pods and claims (clean_up removes what controllers made).
    await system.kubectl(
        "delete", "pods,resourceclaims,resourceclaimtemplates", "--all", "-n", ATTACKER
    )
    await system.clean_up(ATTACKER)
    await system.clean_up(VICTIM)
    assert await system.leftovers() == []


async def still_ready(system: WholeSystem, victim: Victim) -> list[Pod]:
    """The victim's two pods run (the same ones, where no case replaced one) and its domain
    is Ready, with its channel on each of its nodes."""
    pods = await system.wait_running(VICTIM, f"app={NAME}", 2)
    domain = await system.wait_domain_ready(VICTIM, NAME, nodes=2)
    assert domain.status.channel == victim.channel
    for pod in pods:
        assert system.channel_devices(pod.spec.node_name) == {victim.channel}
    return pods


def unaffected(victim: Victim, pods: list[Pod]) -> None:
    assert {p.metadata.uid for p in pods} == {p.metadata.uid for p in victim.pods}


# -- what shows an attempt ---------------------------------------------------------------------


def audited(system: WholeSystem, user: str) -> list[dict[str, Any]]:
    """The API server's audit Events of ``user``'s requests (the policies' Audit action)."""
    path = system.state_dir / AUDIT_LOG_FILE
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [event for event in events if event["user"]["username"] == user]


def audited_refusals(system: WholeSystem, user: str, policy: str) -> list[tuple[str, str]]:
    """(verb, resource) of ``user``'s requests ``policy`` denied, from the audit log."""
    found = []
    for event in audited(system, user):
        failures = json.loads(
            event["annotations"]["validation.policy.admission.k8s.io/validation_failure"]
        )
        if event.get("responseStatus", {}).get("code") == 403 and any(
            f["policy"] == policy for f in failures
        ):
            found.append((event["verb"], event["objectRef"]["resource"]))
    return found


def allocation_refusals(system: WholeSystem) -> float:
    """``cdo_admissions_total{webhook="channel-allocation",result="refused"}`` of the allocator."""
    found = samples(fetch_allocator(system))
    return value(found, "cdo_admissions_total", webhook="channel-allocation", result="refused")


def nats_violations(system: WholeSystem, who: str) -> list[str]:
    """The subjects nats-server logged as refused publishes of identity ``who``."""
    log = system.state_dir / "logs" / "nats-server.log"
    marker = '- Publish Violation - Subject "'
    return [
        line.split(marker, 1)[1].split('"', 1)[0]
        for line in log.read_text(errors="replace").splitlines()
        if marker in line and who in line
    ]


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


async def node_client(system: WholeSystem, account: str, node: str) -> KubeClient:
    """A client with the kubeconfig the node host issued to ``account`` on ``node``."""
    path = system.state_dir / IDENTITIES_DIR / account / f"{node}.kubeconfig"
    return await KubeClient.connect(kubeconfig=path)


async def refused(call: Any, policy: str) -> str:
    """The 403 message of an API call ``policy`` denied."""
    with pytest.raises(KubeApiError) as caught:
        await call
    assert caught.value.code == 403, caught.value.message
    assert f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request" in (
        caught.value.message
    )
    return caught.value.message


async def scheduler_refusals(
    system: WholeSystem, selector: str, count: int, wanted: Callable[[str], bool]
) -> list[Pod]:
    """Until ``count`` pods of ``selector`` in the attacker's namespace carry the webhook's
    refusal in their PodScheduled condition (the scheduler's SchedulerError)."""

    async def all_refused() -> list[Pod] | None:
        pods = live(await system.pods(ATTACKER, selector))
        messages = [
            condition.message
            for pod in pods
            if (condition := pod.condition("PodScheduled")) is not None
            and condition.reason == "SchedulerError"
        ]
        shown = [m for m in messages if ALLOCATION_WEBHOOK in m and wanted(m)]
        return pods if len(pods) == count and len(shown) == count else None

    return await wait_for(
        all_refused, timeout=SYSTEM_STEP_S, interval=0.3, what=f"{count} refusals of {selector}"
    )


# -- (a) attachment devices --------------------------------------------------------------------


def channel_template() -> dict[str, Any]:
    """The tenant's own template on cdo's channel DeviceClass (no ComputeDomain's)."""
    request = {"name": "channel", "exactly": {"deviceClassName": CHANNEL_DEVICE_CLASS}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "grab"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def grabbing_pod(name: str, node: str) -> dict[str, Any]:
    """A pod without GPUs pinned onto ``node`` by nodeSelector, with a claim of the template."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "grab"}},
        "spec": {
            "nodeSelector": {HOSTNAME_LABEL: node},
            "containers": [
                {
                    "name": "idle",
                    "image": "registry.example.com/idle:1.0",
                    "resources": {"claims": [{"name": "channel"}]},
                }
            ],
            "resourceClaims": [{"name": "channel", "resourceClaimTemplateName": "grab"}],
        },
    }


async def test_a_tenants_zero_gpu_pods_get_no_attachment_device_of_a_victims_node(
    system: WholeSystem, victim: Victim
) -> None:
    node = victim.nodes[0]
    before = allocation_refusals(system)
    await system.client.create(RESOURCE_CLAIM_TEMPLATES, channel_template(), namespace=ATTACKER)
    for index in range(ATTACHMENT_DEVICES_PER_NODE):
        await system.client.create(PODS, grabbing_pod(f"grab-{index}", node), namespace=ATTACKER)
    grabbers = await scheduler_refusals(
        system,
        "app=grab",
        ATTACHMENT_DEVICES_PER_NODE,
        lambda message: "which is no ComputeDomain's in namespace attacker" in message,
    )
    assert all(not pod.spec.node_name for pod in grabbers)
    assert all(c.status.allocation is None for c in await system.claims(ATTACKER))
    refusals = allocation_refusals(system)
    assert refusals >= before + ATTACHMENT_DEVICES_PER_NODE, [
        line for line in fetch_allocator(system).decode().splitlines() if "admissions" in line
    ]

    # The victim's pod on that node goes; its replacement is pinned there and starts.
    (gone,) = [p for p in victim.pods if p.spec.node_name == node]
    await system.client.delete(PODS, gone.metadata.name, namespace=VICTIM)
    pods = await still_ready(system, victim)
    (replacement,) = [
        p for p in pods if p.metadata.uid not in {v.metadata.uid for v in victim.pods}
    ]
    assert replacement.spec.node_name == node
    assert all(not p.spec.node_name for p in live(await system.pods(ATTACKER, "app=grab")))
    victim.pods = pods

    await system.kubectl("delete", "pods", "-l", "app=grab", "-n", ATTACKER, "--wait=false")
    await system.client.delete(RESOURCE_CLAIM_TEMPLATES, "grab", namespace=ATTACKER)


# -- (b) Placements ----------------------------------------------------------------------------

PLACEMENT_WRITER_ROLE = f"""\
apiVersion: v1
kind: ServiceAccount
metadata: {{name: ci, namespace: {ATTACKER}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: placements-writer, namespace: {VICTIM}}}
rules:
- apiGroups: [cdo.dev]
  resources: [placements]
  verbs: [get, list, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: ci-writes-placements, namespace: {VICTIM}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: placements-writer}}
subjects:
- {{kind: ServiceAccount, name: ci, namespace: {ATTACKER}}}
"""


async def test_a_service_account_granted_placements_writes_none_of_the_victims(
    system: WholeSystem, victim: Victim, tmp_path: Path
) -> None:
    await system.kubectl("apply", "-f", "-", stdin=PLACEMENT_WRITER_ROLE)
    token = await request_token(system.client, "ci", namespace=ATTACKER)
    kubeconfig = write_kubeconfig(
        tmp_path / "ci.kubeconfig", admin_kubeconfig=system.kubeconfig, user="ci", token=token
    )
    ci = await KubeClient.connect(kubeconfig=kubeconfig)
    try:
        # RBAC lets it read the Placement; the policy refuses every write of it.
        current = msgspec.json.decode(await ci.get(PLACEMENTS, NAME, namespace=VICTIM))
        rewritten = json.loads(json.dumps(current))
        rewritten["spec"]["slices"][0]["channel"] = victim.channel + 1
        message = await refused(
            ci.replace(PLACEMENTS, NAME, rewritten, namespace=VICTIM), "cdo-placement-writer"
        )
        assert "only the clique allocator" in message
        stolen = {
            "apiVersion": current["apiVersion"],
            "kind": current["kind"],
            "metadata": {"name": "stolen"},
            "spec": current["spec"],
        }
        await refused(ci.create(PLACEMENTS, stolen, namespace=VICTIM), "cdo-placement-writer")
    finally:
        await ci.close()
    after = await system.placement(VICTIM, NAME)
    assert after is not None
    assert after.metadata.resource_version == current["metadata"]["resourceVersion"]
    assert await system.placement(VICTIM, "stolen") is None
    unaffected(victim, await still_ready(system, victim))
    user = service_account_user(ATTACKER, "ci")
    assert audited_refusals(system, user, "cdo-placement-writer") == [
        ("update", "placements"),
        ("create", "placements"),
    ]


# -- (c) JetStream administration ----------------------------------------------------------------


async def test_a_nodes_nats_token_changes_no_stream_and_deletes_no_readers_consumer(
    system: WholeSystem, victim: Victim
) -> None:
    node = victim.nodes[0]
    reader_consumer = f"{READER_NAMESPACE}_{READER_ACCOUNT}"
    reader = await nats.connect(
        system.nats_url, token=TokenFile(system.nats_token_file, variable="token_file")
    )
    try:
        owned = reader.jetstream(timeout=5)
        before = (await owned.stream_info(STREAM)).config
        await owned.add_consumer(
            STREAM, durable_name=reader_consumer, ack_policy=api.AckPolicy.EXPLICIT
        )
        token_file = nats_token_path(system.state_dir / IDENTITIES_DIR, IMEX_AGENT_SA, node)
        violations = Violations()
        attacker = await nats.connect(
            system.nats_url,
            token=TokenFile(str(token_file), variable="token_file"),
            name="red-team",
            error_cb=violations.on_error,
            max_reconnect_attempts=1,
        )
        try:
            js = attacker.jetstream(timeout=API_TIMEOUT_S)
            truncated = dataclasses.replace(before, max_msgs=1)
            for call in (
                js.update_stream(truncated),
                js.add_stream(name="STOLEN", subjects=["stolen.>"]),
                js.delete_consumer(STREAM, reader_consumer),
            ):
                with pytest.raises((nats.errors.TimeoutError, nats.js.errors.Error)):
                    await call
            await wait_for(lambda: violations.count(3), what="three refusals")
        finally:
            await attacker.close()
        after = (await owned.stream_info(STREAM)).config
        assert (after.max_msgs, after.max_age, after.subjects) == (
            before.max_msgs,
            before.max_age,
            before.subjects,
        )
        assert (await owned.consumer_info(STREAM, reader_consumer)).name == reader_consumer
        assert await owned.delete_consumer(STREAM, reader_consumer)
    finally:
        await reader.close()
    refused_subjects = [
        f"$JS.API.STREAM.UPDATE.{STREAM}",
        "$JS.API.STREAM.CREATE.STOLEN",
        f"$JS.API.CONSUMER.DELETE.{STREAM}.{reader_consumer}",
    ]
    assert violations.subjects == [s.lower() for s in refused_subjects]
    # The server's log names the identity and its role.
    who = f"{NAMESPACE}/{IMEX_AGENT_SA}@{node} (node-imex-publisher)"
    assert nats_violations(system, who) == refused_subjects
    unaffected(victim, await still_ready(system, victim))


# -- (d) NVIDIA's GPU ResourceSlice ---------------------------------------------------------------


def nvidia_gpu_slice(node: str) -> dict[str, Any]:
    """The GPU ResourceSlice NVIDIA's GPU DRA driver publishes for ``node`` (its four GPUs)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{GPU_DRA_DRIVER}"},
        "spec": {
            "driver": GPU_DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{index}", "attributes": {"type": {"string": "gpu"}}}
                for index in range(4)
            ],
        },
    }


async def test_a_node_identity_rewrites_and_deletes_no_gpu_slice_of_nvidias_driver(
    system: WholeSystem, victim: Victim
) -> None:
    node = victim.nodes[0]
    body = nvidia_gpu_slice(node)
    name = body["metadata"]["name"]
    published = msgspec.json.decode(await system.client.create(RESOURCE_SLICES, body))
    agent = await node_client(system, IMEX_AGENT_SA, node)
    try:
        emptied = json.loads(json.dumps(published))
        emptied["spec"]["devices"] = []
        for call in (
            agent.replace(RESOURCE_SLICES, name, emptied),
            agent.delete(RESOURCE_SLICES, name),
        ):
            message = await refused(call, "cdo-node-restriction")
            assert GPU_DRA_DRIVER in message
    finally:
        await agent.close()
    kept = msgspec.json.decode(await system.client.get(RESOURCE_SLICES, name))
    assert kept["metadata"]["resourceVersion"] == published["metadata"]["resourceVersion"]
    unaffected(victim, await still_ready(system, victim))
    user = service_account_user(NAMESPACE, IMEX_AGENT_SA)
    assert audited_refusals(system, user, "cdo-node-restriction") == [
        ("update", "resourceslices"),
        ("delete", "resourceslices"),
    ]
    await system.client.delete(RESOURCE_SLICES, name)


# -- (e) evictions -------------------------------------------------------------------------------


async def test_a_health_monitor_evicts_no_pod_of_another_node(
    system: WholeSystem, victim: Victim
) -> None:
    target = victim.pods[0]
    busy = {pod.spec.node_name for pod in await system.pods()}
    elsewhere = sorted(n.metadata.name for n in await system.nodes() if n.metadata.name not in busy)
    monitor = await node_client(system, HEALTH_MONITOR_SA, elsewhere[0])
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": target.metadata.name, "namespace": VICTIM},
    }
    try:
        message = await refused(
            monitor.create(
                PODS, eviction, namespace=VICTIM, name=target.metadata.name, subresource="eviction"
            ),
            "cdo-node-evictions",
        )
    finally:
        await monitor.close()
    assert f"node {elsewhere[0]} may evict only pods bound to it" in message
    unaffected(victim, await still_ready(system, victim))
    user = service_account_user(NAMESPACE, HEALTH_MONITOR_SA)
    assert audited_refusals(system, user, "cdo-node-evictions") == [("create", "pods")]


# -- (f) the earlier ones --------------------------------------------------------------------------


async def test_a_forged_claim_copying_the_victims_labels_gets_no_device(
    system: WholeSystem, victim: Victim
) -> None:
    node = victim.nodes[0]
    pod = next(p for p in victim.pods if p.spec.node_name == node)
    real = claim_of(pod, await system.claims(VICTIM))
    before = allocation_refusals(system)
    await system.client.create(RESOURCE_CLAIMS, forged_claim(real), namespace=ATTACKER)
    await system.client.create(PODS, intruder_pod(node), namespace=ATTACKER)
    await scheduler_refusals(
        system,
        "app=intruder",
        1,
        lambda message: "was not made from a ResourceClaimTemplate" in message,
    )
    (forged,) = await system.claims(ATTACKER)
    assert forged.status.allocation is None
    assert allocation_refusals(system) > before
    unaffected(victim, await still_ready(system, victim))
    await system.client.delete(PODS, "intruder", namespace=ATTACKER)
    await system.client.delete(RESOURCE_CLAIMS, "forged", namespace=ATTACKER)


async def test_a_nodes_nats_token_publishes_no_fault_of_the_victims_node(
    system: WholeSystem, victim: Victim
) -> None:
    target_node = victim.nodes[0]
    busy = {pod.spec.node_name for pod in await system.pods()}
    own = sorted(n.metadata.name for n in await system.nodes() if n.metadata.name not in busy)[0]
    token_file = nats_token_path(system.state_dir / IDENTITIES_DIR, HEALTH_MONITOR_SA, own)
    target = subjects.NODE_FAULT.render(node=target_node)
    tap = await system.tap(target)
    try:
        await refused_publish(system, str(token_file), target)
        await tap.flush()
    finally:
        await tap.close()
    assert tap.events == []
    assert target_node not in await system.faulted_nodes()
    who = f"{NAMESPACE}/{HEALTH_MONITOR_SA}@{own}"
    assert nats_violations(system, who) == [target]
    unaffected(victim, await still_ready(system, victim))
