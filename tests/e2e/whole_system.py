"""The whole cdo system on the simulator, started as ``cdo sim up`` starts it, for end-to-end tests.

:func:`running_whole_system` brings up, through :func:`sim.control.up`, a real nats-server,
the API emulator with 36 simulated nodes, the control plane (domain controller and clique
allocator as child processes it restarts) and the node host (every node's IMEX agent and health
monitor), in a short temporary state directory (unix socket paths are limited). It takes about
15 s, so each test module starts one system and its tests share it: every test works in a fresh
namespace and leaves the cluster empty again (:meth:`WholeSystem.clean_up`).

Authentication and RBAC are enforced, and each cdo service runs as its own ServiceAccount. When
a system stops, its API emulator's access record is read (:mod:`tests.e2e.grants`): a 403 any
cdo service got fails the module (an error at teardown), and the grants they used join the
session's record, which ``test_used_grants.py`` checks against deploy/. Before it stops, the
system's JetStream stream is replayed and every event validated against proto/
(:mod:`tests.e2e.contract`): one that breaks the contract fails the module the same way.

With ``nats_auth`` the system runs NATS identities (``cdo sim up --nats-auth``): the services
connect with their ServiceAccount tokens, and what reads here (:meth:`WholeSystem.tap`, the
replay, :meth:`WholeSystem.cdo`) connects as the system's reader, with its token file.

The health monitors' timings are shortened through ``CDO_HEALTH_*`` variables, which the node
host passes on to them, so a fault recovers within seconds rather than minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import nats
from nats.aio.msg import Msg

from shared.bus.cloudevents import decode, lowercase_headers
from shared.bus.token import TokenFile
from shared.command_errors import CommandError
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain, Placement
from shared.crds.names import (
    CLIQUE_LABEL,
    DOMAIN_LABEL,
    GPU_DEVICE_CLASS,
    GPU_DRA_DRIVER,
    GPU_FAULT_TAINT,
    HOSTNAME_LABEL,
    NUM_NODES_ANNOTATION,
    PLACEMENT_GATE,
)
from shared.events.base import Event
from shared.kube.client import KubeClient
from shared.kube.models import Node, Pod, ResourceClaim, ResourceClaimTemplate
from shared.kube.resources import (
    DEPLOYMENTS,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
)
from sim import control as simctl
from sim.control.processes import Command, respawn
from sim.control.state import (
    ACCESS_RECORD_FILE,
    Record,
    Started,
    read_controlplane,
    read_nodehost,
    read_record,
)
from sim.control.up import node_ready
from sim.kubeapi.releases import NEWEST_RELEASE
from sim.topology import TOPOLOGIES_DIR
from sim.topology.generate import nvl72_racks, write_topology
from tests.e2e import contract, grants
from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples"
KUBECTL = Path(sys.executable).parent / "kubectl"
GPUS_PER_NODE = 4
NODES_PER_CLIQUE = 18
SYSTEM_STEP_S = 120.0
"""Bound of one whole-system step (placement, scheduling, IMEX, cleanup) on a busy machine."""

HEALTH_TIMINGS = {
    # An XID counts as active this long, then the node must stay healthy for the hold-down
    # before its taint goes: seconds here instead of the production minutes.
    "CDO_HEALTH_XID_LATCH_S": "10",
    "CDO_HEALTH_HOLD_DOWN_S": "5",
}
KEEP_ENV = "CDO_E2E_KEEP"
"""Set to 1 to keep each system's state directory (logs, node files) after the module ends."""
DOMAIN_CONTROLLER = "domain-controller"
CLIQUE_ALLOCATOR = "clique-allocator"
NODE_HOST_MARKER = "-m sim.nodehost"


class _Items(msgspec.Struct):
    items: list[msgspec.Raw]


def _decode_items(raw: bytes, kind: type[Any]) -> list[Any]:
    return [
        msgspec.json.decode(item, type=kind) for item in msgspec.json.decode(raw, type=_Items).items
    ]


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in os.environ while the block runs: simctl's processes inherit it."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- workloads ---------------------------------------------------------------------------------


def domain_object(
    name: str, *, num_nodes: int | None = None, gang: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """A ComputeDomain (the stored version, v1beta2) whose claim template is ``<name>-rct``;
    ``num_nodes`` is v1beta1's spec.numNodes, kept in v1beta2 as NVIDIA keeps it (an
    annotation); ``gang`` is cdo's spec.gang."""
    spec: dict[str, Any] = {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}}
    if gang:
        spec["gang"] = dict(gang)
    metadata: dict[str, Any] = {"name": name}
    if num_nodes is not None:
        metadata["annotations"] = {NUM_NODES_ANNOTATION: str(num_nodes)}
    return {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": COMPUTE_DOMAINS.kind,
        "metadata": metadata,
        "spec": spec,
    }


def deployment_object(name: str, *, replicas: int, gpus: int) -> dict[str, Any]:
    """A Deployment ``name`` (label ``app=<name>``) whose pods use domain ``name``'s channel."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "worker",
                            "image": "registry.example.com/worker:1.0",
                            "resources": {
                                "limits": {"nvidia.com/gpu": str(gpus)},
                                "claims": [{"name": "imex-channel"}],
                            },
                        }
                    ],
                    "resourceClaims": [
                        {"name": "imex-channel", "resourceClaimTemplateName": f"{name}-rct"}
                    ],
                },
            },
        },
    }


def gpu_template(name: str, count: int) -> dict[str, Any]:
    request = {"name": "gpus", "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def dra_deployment(name: str, domain: str, *, replicas: int, template: str) -> dict[str, Any]:
    """A Deployment whose pods take their GPUs from a claim of ``template`` (and domain
    ``domain``'s channel)."""
    body = deployment_object(name, replicas=replicas, gpus=0)
    spec = body["spec"]["template"]["spec"]
    container = spec["containers"][0]
    container["resources"] = {"claims": [{"name": "gpus"}, {"name": "imex-channel"}]}
    spec["resourceClaims"] = [
        {"name": "gpus", "resourceClaimTemplateName": template},
        {"name": "imex-channel", "resourceClaimTemplateName": f"{domain}-rct"},
    ]
    return body


def claim_devices(pod: Pod, claims: dict[str, ResourceClaim]) -> list[tuple[str, str]]:
    """The (pool, device) GPUs of the pod's ``gpus`` claim."""
    names = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    claim = claims.get(names.get("gpus") or "")
    if claim is None or claim.status.allocation is None:
        return []
    return [
        (result.pool, result.device)
        for result in claim.status.allocation.devices.results
        if result.driver == GPU_DRA_DRIVER
    ]


def gated(pod: Pod) -> bool:
    return any(gate.name == PLACEMENT_GATE for gate in pod.spec.scheduling_gates)


def live(pods: list[Pod]) -> list[Pod]:
    """The pods that are neither being deleted nor finished."""
    return [
        pod
        for pod in pods
        if pod.metadata.deletion_timestamp is None
        and pod.status.phase not in ("Succeeded", "Failed")
    ]


# -- NATS --------------------------------------------------------------------------------------


class EventTap:
    """Every cdo event published on a subject pattern while it listens, decoded."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._connection: Any = None

    async def start(self, url: str, subject: str, *, token_file: str = "") -> EventTap:
        """Listen on ``subject``; with ``token_file`` (a system with NATS identities), as the
        reader whose token it holds."""
        token = TokenFile(token_file, variable="token_file") if token_file else None
        self._connection = await nats.connect(url, token=token)
        await self._connection.subscribe(subject, cb=self._received)
        await self._connection.flush()  # the subscription is in place before anything happens
        return self

    async def _received(self, message: Msg) -> None:
        self.events.append(decode(lowercase_headers(message.headers), message.data))

    async def flush(self) -> None:
        """A round trip to the server: whatever it delivered before has been received."""
        await self._connection.flush()

    def of_type(self, kind: type[Any]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


# -- the system --------------------------------------------------------------------------------


class WholeSystem:
    """One running system: its state directory, an API client and the helpers tests share."""

    def __init__(self, *, state_dir: Path, client: KubeClient, record: Record) -> None:
        self.state_dir = state_dir
        self.client = client
        self.kubeconfig = Path(record.kubeconfig)
        self.nats_url = record.nats_url
        self.nats_token_file = record.nats_token_file
        """With NATS identities: the reader's token file ("" without)."""
        self.nats_auth_url = record.nats_auth_url
        """With NATS identities: the authenticator's probe and metrics URL."""

    async def tap(self, subject: str) -> EventTap:
        """An :class:`EventTap` on ``subject``, as this system's reader."""
        return await EventTap().start(self.nats_url, subject, token_file=self.nats_token_file)

    # -- commands ------------------------------------------------------------------------------

    async def kubectl(self, *args: str, stdin: str | None = None) -> str:
        process = await asyncio.create_subprocess_exec(
            str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await process.communicate(stdin.encode() if stdin is not None else None)
        assert process.returncode == 0, f"kubectl {' '.join(args)}: {out.decode()}"
        return out.decode()

    async def cdo(self, *args: str) -> str:
        """``cdo ARGS --state-dir <this system>``, as a user runs it (with NATS identities, as
        the reader, the token file in CDO_NATS_TOKEN_FILE); its stdout."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "CDO_NATS_URL")}
        if self.nats_token_file:
            env["CDO_NATS_TOKEN_FILE"] = self.nats_token_file
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", *args, "--state-dir", str(self.state_dir),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode == 0, f"cdo {' '.join(args)}: {err.decode()}"
        return out.decode()

    async def preflight(self, *args: str) -> tuple[int, dict[str, dict[str, str]]]:
        """``cdo preflight -o json ARGS`` on this system: its exit code (0, 1 or 2, none of
        them an error here) and its checks by name."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "CDO_NATS_URL")}
        if self.nats_token_file:
            env["CDO_NATS_TOKEN_FILE"] = self.nats_token_file
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "preflight", "-o", "json", "--state-dir",
            str(self.state_dir), *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode is not None and out.startswith(b"{"), err.decode()
        return process.returncode, {c["name"]: c for c in json.loads(out)["checks"]}

    async def capacity(self) -> dict[str, dict[str, Any]]:
        """Each clique's capacity as ``cdo status --json`` reads it from the NATS KV snapshots."""
        status = json.loads(await self.cdo("status", "--json"))
        return {entry["clique"]: entry for entry in status["cliques"]}

    def informer_census(self, node: str) -> dict[str, dict[str, int]]:
        """Objects each of a hosted (full) node's services holds in its informers, per
        resource: ``{"imex-agent": {"nodes": 1, ...}, "health-monitor": {...}}`` (the node
        host's ``GET /nodes/<node>/informers``, sim/nodehost/informers.py)."""
        host = read_nodehost(self.state_dir)
        assert host is not None, f"no node host runs in {self.state_dir}"
        census: dict[str, dict[str, int]] = simctl.request(
            host.control_url, "GET", f"/nodes/{node}/informers"
        )
        return census

    async def inject_fault(self, node: str, body: dict[str, object] | None) -> None:
        """``cdo sim fault``: a fault into the node's simulated NVML (None clears them)."""
        await asyncio.to_thread(simctl.fault, self.state_dir, node, body, say=lambda _line: None)

    async def create_namespace(self, name: str) -> None:
        await self.client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    async def create_workload(
        self,
        namespace: str,
        name: str,
        *,
        replicas: int,
        gpus: int,
        spread: int | None = None,
    ) -> None:
        """A ComputeDomain ``name`` and a Deployment ``name`` of pods using its channel;
        ``spread``: the domain's ``spec.gang.nodes``."""
        gang = {"nodes": spread} if spread is not None else None
        await self.client.create(
            COMPUTE_DOMAINS, domain_object(name, gang=gang), namespace=namespace
        )
        await self.client.create(
            DEPLOYMENTS,
            deployment_object(name, replicas=replicas, gpus=gpus),
            namespace=namespace,
        )

    async def delete_workload(self, namespace: str, name: str) -> None:
        """Delete the Deployment and the ComputeDomain ``name`` without waiting."""
        await self.client.delete(DEPLOYMENTS, name, namespace=namespace, propagation="Background")
        await self.client.delete(COMPUTE_DOMAINS, name, namespace=namespace)

    async def scale(self, namespace: str, deployment: str, replicas: int) -> None:
        await self.kubectl(
            "scale", f"deployment/{deployment}", "-n", namespace, f"--replicas={replicas}"
        )

    # -- reading the API -----------------------------------------------------------------------

    async def pods(self, namespace: str = "", selector: str = "") -> list[Pod]:
        raw = await self.client.list(PODS, namespace=namespace, label_selector=selector)
        return _decode_items(raw, Pod)

    async def domain(self, namespace: str, name: str) -> ComputeDomain | None:
        raw = await self.client.get_or_none(COMPUTE_DOMAINS, name, namespace=namespace)
        return None if raw is None else msgspec.json.decode(raw, type=ComputeDomain)

    async def domains(self, namespace: str = "") -> list[ComputeDomain]:
        return _decode_items(
            await self.client.list(COMPUTE_DOMAINS, namespace=namespace), ComputeDomain
        )

    async def placements(self, namespace: str = "") -> list[Placement]:
        return _decode_items(await self.client.list(PLACEMENTS, namespace=namespace), Placement)

    async def placement(self, namespace: str, name: str) -> Placement | None:
        raw = await self.client.get_or_none(PLACEMENTS, name, namespace=namespace)
        return None if raw is None else msgspec.json.decode(raw, type=Placement)

    async def claims(self, namespace: str = "") -> list[ResourceClaim]:
        return _decode_items(
            await self.client.list(RESOURCE_CLAIMS, namespace=namespace), ResourceClaim
        )

    async def templates(self, namespace: str = "") -> list[ResourceClaimTemplate]:
        raw = await self.client.list(RESOURCE_CLAIM_TEMPLATES, namespace=namespace)
        return _decode_items(raw, ResourceClaimTemplate)

    async def nodes(self) -> list[Node]:
        return _decode_items(await self.client.list(NODES), Node)

    async def node(self, name: str) -> Node:
        return msgspec.json.decode(await self.client.get(NODES, name), type=Node)

    async def cliques(self) -> dict[str, str]:
        """The clique label of every node."""
        return {
            node.metadata.name: node.metadata.labels.get(CLIQUE_LABEL, "")
            for node in await self.nodes()
        }

    async def faulted_nodes(self) -> list[str]:
        return [
            node.metadata.name
            for node in await self.nodes()
            if any(taint.key == GPU_FAULT_TAINT for taint in node.spec.taints)
        ]

    # -- files the IMEX agents own -------------------------------------------------------------

    def channel_devices(self, node: str) -> set[int]:
        """The IMEX channel device nodes the node's agent has made (sim.nodehost's layout)."""
        directory = self.state_dir / "nodehost" / node / "dev"
        try:
            names = [path.name for path in directory.iterdir()]
        except FileNotFoundError:
            return set()
        return {int(name.removeprefix("channel")) for name in names if name.startswith("channel")}

    def channel_specs(self, node: str) -> set[str]:
        """The claim uids of the IMEX channel CDI specs the node's agent has written."""
        directory = self.state_dir / "nodehost" / node / "cdi"
        prefix = "cdo.dev-imex-channel_"
        try:
            names = [path.name for path in directory.iterdir()]
        except FileNotFoundError:
            return set()
        return {
            name.removeprefix(prefix).removesuffix(".json")
            for name in names
            if name.startswith(prefix)
        }

    async def all_channel_devices(self) -> dict[str, set[int]]:
        """Every node's channel devices, for the nodes that have any."""
        found = {
            node.metadata.name: self.channel_devices(node.metadata.name)
            for node in await self.nodes()
        }
        return {node: channels for node, channels in found.items() if channels}

    # -- waiting -------------------------------------------------------------------------------

    async def running(self, namespace: str, selector: str, count: int) -> list[Pod] | None:
        """The pods once exactly ``count`` live ones run, ungated and pinned where they run."""
        found = live(await self.pods(namespace, selector))
        if len(found) != count:
            return None
        settled = all(
            pod.status.phase == "Running"
            and not gated(pod)
            and pod.spec.node_selector.get(HOSTNAME_LABEL) == pod.spec.node_name
            for pod in found
        )
        return found if settled else None

    async def wait_running(
        self, namespace: str, selector: str, count: int, *, within_s: float = SYSTEM_STEP_S
    ) -> list[Pod]:
        return await wait_for(
            lambda: self.running(namespace, selector, count),
            timeout=within_s,
            interval=0.2,
            what=f"{count} pods {selector} running in {namespace}",
        )

    async def wait_domain_ready(
        self,
        namespace: str,
        name: str,
        *,
        nodes: int | None = None,
        within_s: float = SYSTEM_STEP_S,
    ) -> ComputeDomain:
        """Until the domain is Ready (on exactly ``nodes`` member nodes, if given)."""

        async def ready() -> ComputeDomain | None:
            domain = await self.domain(namespace, name)
            if domain is None or domain.status.status != "Ready":
                return None
            if nodes is not None and len(domain.status.nodes) != nodes:
                return None
            current = domain.status.observed_generation == domain.metadata.generation
            return domain if current else None

        return await wait_for(
            ready, timeout=within_s, interval=0.2, what=f"{namespace}/{name} Ready"
        )

    async def clean_up(self, namespace: str, *, within_s: float = SYSTEM_STEP_S) -> None:
        """Delete the namespace's workloads and domains; wait until nothing of them is left."""
        await self.kubectl("delete", "deployments,jobs", "--all", "-n", namespace, "--wait=false")
        await self.kubectl("delete", "computedomains", "--all", "-n", namespace, "--wait=false")

        async def remaining() -> list[str]:
            return [
                *(f"domain {d.metadata.name}" for d in await self.domains(namespace)),
                *(f"pod {p.metadata.name}" for p in await self.pods(namespace)),
                *(f"placement {p.metadata.name}" for p in await self.placements(namespace)),
                *(f"claim {c.metadata.name}" for c in await self.claims(namespace)),
                *(f"template {t.metadata.name}" for t in await self.templates(namespace)),
            ]

        async def gone() -> bool:
            return not await remaining()

        try:
            await wait_for(gone, timeout=within_s, interval=0.3, what=f"{namespace} cleaned up")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; left: {await remaining()}") from None

    async def leftovers(self) -> list[str]:
        """What cdo would have leaked once no domain exists: anything listed here is a leak."""
        found = [
            *(
                f"template {t.key}"
                for t in await self.templates()
                if DOMAIN_LABEL in t.metadata.labels
            ),
            *(f"claim {c.key}" for c in await self.claims()),
            *(f"placement {p.key}" for p in await self.placements()),
            *(f"fault taint on {node}" for node in await self.faulted_nodes()),
        ]
        for node, channels in sorted((await self.all_channel_devices()).items()):
            found.append(f"channel devices {sorted(channels)} on {node}")
        return found

    # -- processes -----------------------------------------------------------------------------

    def service_pid(self, name: str) -> int:
        """The pid of the control plane's child ``name`` (domain-controller, clique-allocator)."""
        info = read_controlplane(self.state_dir)
        assert info is not None, "the control plane is not running"
        return info.services[name].pid

    def node_host_pid(self) -> int:
        host = read_nodehost(self.state_dir)
        assert host is not None, "the node host is not running"
        return host.pid

    async def wait_services_ready(self, *, within_s: float = SYSTEM_STEP_S) -> None:
        """Until the control plane's services answer ready and every hosted node is ready."""

        def ready() -> bool:
            info = read_controlplane(self.state_dir)
            if info is None or not info.ready:
                return False
            if not all(_probe_ready(service.probe_url) for service in info.services.values()):
                return False
            host = read_nodehost(self.state_dir)
            if host is None:
                return False
            try:
                nodes = simctl.request(host.control_url, "GET", "/nodes")
            except CommandError:
                return False
            return all(not node["powered"] or node_ready(node) for node in nodes)

        async def probe() -> bool:
            return await asyncio.to_thread(ready)

        await wait_for(probe, timeout=within_s, interval=0.5, what="every service ready")

    def kill_node_host(self) -> Command:
        """SIGKILL the node host; what it ran with, to start it again the same way."""
        pid = self.node_host_pid()
        command = Command.of(pid)
        os.kill(pid, signal.SIGKILL)
        return command

    def start_node_host(self, command: Command) -> int:
        """Start the node host again as ``cdo sim up`` did; ``cdo sim down`` stops the new one."""
        return respawn(self.state_dir, self._started(NODE_HOST_MARKER), command).pid

    def _started(self, marker: str) -> Started:
        record = read_record(self.state_dir)
        assert record is not None
        (started,) = [p for p in record.processes if p.marker == marker]
        return started


def _probe_ready(probe_url: str) -> bool:
    try:
        with urllib.request.urlopen(probe_url + "/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def alive(pid: int, marker: str) -> bool:
    """Whether ``pid`` still runs the program whose command line contains ``marker``."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z" and marker in command


def gpus_per_node(pods: list[Pod]) -> dict[str, int]:
    """GPUs the pods bound to each node hold: a pod being deleted holds its GPUs until it ends."""
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
            used[pod.spec.node_name] += pod.gpus()
    return dict(used)


def reserved_per_node(placements: list[Placement]) -> dict[str, int]:
    """GPUs the Placements reserve on each node, over every slice."""
    used: dict[str, int] = defaultdict(int)
    for placement in placements:
        for piece in placement.spec.all_slices:
            for member in piece.members:
                used[member.node] += member.gpus
    return dict(used)


def shared_channels(placements: list[Placement]) -> list[str]:
    """Channels two domains hold in one clique (none, when the allocator is right)."""
    owners: dict[tuple[str, int], set[str]] = defaultdict(set)
    for placement in placements:
        for piece in placement.spec.all_slices:
            owners[(piece.clique, piece.channel)].add(placement.key)
    return [f"channel {ch} of {cl}: {keys}" for (cl, ch), keys in owners.items() if len(keys) > 1]


def seated(placement: Placement) -> dict[str, tuple[int, str, int]]:
    """Each seated pod's (slice index, node, rank)."""
    return {
        pod.name: (piece.index, member.node, pod.rank)
        for piece in placement.spec.all_slices
        for member in piece.members
        for pod in member.pods
    }


ADDRESS_BASE = re.compile(r"^address_base:\s*\S+", re.MULTILINE)


def on_own_address_block(topology: Path | None, directory: Path) -> Path:
    """The topology (the default two racks when None) on a random address block of its own:
    the nodes' IMEX daemons listen on fixed ports of their node's address, so two simulated
    clusters on one machine (developers' runs side by side) must not share addresses."""
    text = (topology or TOPOLOGIES_DIR / "default.yaml").read_text()
    base = f"address_base: 127.{random.randint(20, 250)}.{random.randrange(0, 200, 8)}.0"
    text = ADDRESS_BASE.sub(base, text) if ADDRESS_BASE.search(text) else f"{text}\n{base}\n"
    written = directory / "topology.yaml"
    written.write_text(text)
    return written


@contextlib.asynccontextmanager
async def running_whole_system(
    env: Mapping[str, str] | None = None,
    *,
    topology: Path | None = None,
    nats_auth: bool = False,
    kubernetes_version: str = NEWEST_RELEASE,
    count_grants: bool = True,
    racks: int | None = None,
    full_racks: int | None = None,
) -> AsyncIterator[WholeSystem]:
    """Start everything with ``cdo sim up`` (about 15 s for the default 36 nodes) on
    ``topology`` (the default two racks when None; on an address block of its own,
    :func:`on_own_address_block`), with NATS identities when ``nats_auth``
    (``--nats-auth``), at Kubernetes ``kubernetes_version`` with its default gates and APIs;
    stop it and remove its files on exit. ``count_grants=False`` keeps the grants used there
    out of the session's record (a 403 to a cdo service still fails): where tests act with
    cdo's own identities, as an attacker holding a node's would, their requests are not the
    services' use. ``racks`` generates a topology of that many NVL72 racks instead of
    ``topology``; with ``full_racks`` M only the first M racks are full, the others' nodes
    hollow (docs/simulator.md#hollow-racks): ``system.informer_census(node)`` of a full node
    then counts what its services' informers hold."""
    state_dir = Path(tempfile.mkdtemp(prefix="cdo-e2e-"))
    topology_dir = Path(tempfile.mkdtemp(prefix="cdo-e2e-topology-"))
    if racks is not None:
        topology = write_topology(nvl72_racks(racks), topology_dir / "racks.yaml")
    options = simctl.UpOptions(
        state_dir=state_dir,
        topology=on_own_address_block(topology, topology_dir),
        nats_url=None,
        nodes="*",
        imex_server_port=None,
        imex_cmd_port=None,
        wait=True,
        timeout_s=180,
        nats_auth=nats_auth,
        kubernetes_version=kubernetes_version,
        full_racks=full_racks,
    )
    lines: list[str] = []
    client: KubeClient | None = None
    denials: list[str] = []
    record = None
    replayed = contract.Replay()
    came_up = False
    try:
        with _environment({**HEALTH_TIMINGS, **(env or {})}):
            await asyncio.to_thread(simctl.up, options, say=lines.append)
        record = read_record(state_dir)
        assert record is not None, "\n".join(lines)
        grants.SESSION.started += 1
        came_up = True
        client = await KubeClient.connect(kubeconfig=record.kubeconfig)
        yield WholeSystem(state_dir=state_dir, client=client, record=record)
    finally:
        if client is not None:
            await client.close()
        if came_up and record is not None:
            # Before the system stops: the stream lives in its nats-server.
            replayed = await contract.replay(record.nats_url, token_file=record.nats_token_file)
        with contextlib.suppress(CommandError):
            await asyncio.to_thread(simctl.down, state_dir, say=lines.append)
        if came_up:
            session = grants.SESSION if count_grants else grants.SessionGrants()
            denials = grants.take_record(state_dir / ACCESS_RECORD_FILE, session=session)
        if denials:
            print("cdo services refused by RBAC:", *denials, sep="\n  ", file=sys.stderr)
        shutil.rmtree(topology_dir, ignore_errors=True)
        if os.environ.get(KEEP_ENV) != "1":
            shutil.rmtree(state_dir, ignore_errors=True)
    assert not denials, "cdo services refused by RBAC:\n  " + "\n  ".join(denials)
    assert not replayed.violations, (
        f"{len(replayed.violations)} of {replayed.events} events break proto/:\n  "
        + "\n  ".join(replayed.violations[:20])
    )
