"""Reading what ``cdo preflight`` judges: the API server, its discovery, nodes, GPUs, cdo's own
objects, the pod webhook and NATS (the I/O shell of :mod:`cli.preflight.checks`).

Every request has the CLI's short timeout. An API server that cannot be reached (or nothing
that names one) is a fact (:attr:`ApiFacts.problem`), not an error: the command says so as a
failed check. The other reads that the server refuses are named in :attr:`Facts.unreadable`.

The pod webhook is tried as the API server would reach it. With ``failurePolicy: Fail``, a
server-side dry run (``dryRun=All``) creating a pod in ``default`` with a claim made from a
template, which the webhook's match conditions send to it (nothing is stored; a webhook that
does not answer fails it). With ``Ignore`` (deploy/'s: an unanswered pod is admitted as it is,
and the ValidatingAdmissionPolicy ``cdo-pod-gate`` refuses a domain's pod that came through
ungated) a dry run passes whatever happens, so: a webhook registered by URL (the simulator's)
is sent an AdmissionReview of that pod directly, over TLS checked against its ``caBundle``; one
registered as a Service is judged by the Service's ready endpoints (its EndpointSlices). The
serving certificate is read from the Secret the allocator mounts
(``cdo-clique-allocator-webhook-tls``) for a Service, or from a TLS handshake with the URL.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import msgspec
from cryptography import x509

from cli.connection import Endpoints, connect_kube, connect_nats
from cli.preflight.facts import (
    ApiFacts,
    Condition,
    Facts,
    GpuSlice,
    NatsFacts,
    NodeFacts,
    WebhookFacts,
    Workload,
)
from shared.command_errors import UnreachableError
from shared.crds.coexistence import NVIDIA_DEVICE_CLASSES
from shared.crds.names import GPU_DRA_DRIVER, GPU_RESOURCE
from shared.kube.apis import OPTIONAL_APIS, REQUIRED_APIS, group_version, served_resources
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import (
    DEPLOYMENTS,
    DEVICE_CLASSES,
    NODES,
    RESOURCE_SLICES,
    STATEFUL_SETS,
    Resource,
    core,
)

DAEMON_SETS = Resource(
    group="apps", version="v1", plural="daemonsets", kind="DaemonSet", namespaced=True
)
SECRETS = core("secrets", "Secret")
MUTATING_WEBHOOKS = Resource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="mutatingwebhookconfigurations",
    kind="MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_POLICIES = Resource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="validatingadmissionpolicies",
    kind="ValidatingAdmissionPolicy",
    namespaced=False,
)
POLICY_BINDINGS = Resource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="validatingadmissionpolicybindings",
    kind="ValidatingAdmissionPolicyBinding",
    namespaced=False,
)
ENDPOINT_SLICES = Resource(
    group="discovery.k8s.io",
    version="v1",
    plural="endpointslices",
    kind="EndpointSlice",
    namespaced=True,
)
WEBHOOK = "cdo-clique-allocator"
WEBHOOK_SECRET = "cdo-clique-allocator-webhook-tls"
GATE_POLICY = "cdo-pod-gate"
WORKLOADS = (
    (DEPLOYMENTS, "cdo-domain-controller"),
    (DEPLOYMENTS, "cdo-clique-allocator"),
    (DAEMON_SETS, "cdo-imex-agent"),
    (DAEMON_SETS, "cdo-health-monitor"),
    (STATEFUL_SETS, "cdo-nats"),
)
"""cdo's workloads as deploy/ names them (the NATS StatefulSet only where deploy/ runs it)."""
PROBE_NAMESPACE = "default"
HANDSHAKE_TIMEOUT_S = 5.0


# -- decoding -------------------------------------------------------------------------------------


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class _Condition(msgspec.Struct, frozen=True):
    type: str
    status: str = ""
    reason: str = ""
    message: str = ""


class _NodeStatus(msgspec.Struct, frozen=True):
    allocatable: dict[str, str] = msgspec.field(default_factory=dict)
    conditions: list[_Condition] = msgspec.field(default_factory=list)


class _Node(msgspec.Struct, frozen=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _NodeStatus = msgspec.field(default_factory=_NodeStatus)


class _Nodes(msgspec.Struct, frozen=True):
    items: list[_Node] = msgspec.field(default_factory=list)


class _SliceSpec(msgspec.Struct, frozen=True, rename="camel"):
    driver: str = ""
    node_name: str = ""
    devices: list[dict[str, Any]] = msgspec.field(default_factory=list)


class _Slice(msgspec.Struct, frozen=True):
    spec: _SliceSpec = msgspec.field(default_factory=_SliceSpec)


class _Slices(msgspec.Struct, frozen=True):
    items: list[_Slice] = msgspec.field(default_factory=list)


class _WorkloadStatus(msgspec.Struct, frozen=True, rename="camel"):
    replicas: int = 0
    ready_replicas: int = 0
    desired_number_scheduled: int = 0
    number_ready: int = 0


class _WorkloadSpec(msgspec.Struct, frozen=True):
    replicas: int | None = None


class _Workload(msgspec.Struct, frozen=True):
    spec: _WorkloadSpec = msgspec.field(default_factory=_WorkloadSpec)
    status: _WorkloadStatus = msgspec.field(default_factory=_WorkloadStatus)


class VersionInfo(msgspec.Struct, frozen=True, rename="camel"):
    major: str = ""
    minor: str = ""
    git_version: str = ""


def node_facts(raw: bytes) -> list[NodeFacts]:
    found = []
    for node in msgspec.json.decode(raw, type=_Nodes).items:
        try:
            gpus = int(node.status.allocatable.get(GPU_RESOURCE, "0") or 0)
        except ValueError:
            gpus = 0
        found.append(
            NodeFacts(
                name=node.metadata.name,
                labels=node.metadata.labels,
                annotations=node.metadata.annotations,
                gpus=gpus,
                conditions={
                    c.type: Condition(status=c.status, reason=c.reason, message=c.message)
                    for c in node.status.conditions
                },
            )
        )
    return found


def release_of(version: VersionInfo) -> tuple[int, int] | None:
    """(major, minor) of ``/version``; ``minor`` may carry a ``+`` (managed clusters)."""
    try:
        return int(version.major), int(version.minor.rstrip("+"))
    except ValueError:
        return None


def workload_of(kind: str, name: str, raw: bytes | None) -> Workload:
    if raw is None:
        return Workload(kind=kind, name=name)
    found = msgspec.json.decode(raw, type=_Workload)
    if kind == "DaemonSet":
        desired, ready = found.status.desired_number_scheduled, found.status.number_ready
    else:
        replicas = found.spec.replicas
        desired = found.status.replicas if replicas is None else replicas
        ready = found.status.ready_replicas
    return Workload(kind=kind, name=name, found=True, desired=desired, ready=ready)


def certificate_expiry(pem_or_der: bytes) -> datetime:
    """The end of a certificate's validity (PEM or DER)."""
    if pem_or_der.lstrip().startswith(b"-----BEGIN"):
        certificate = x509.load_pem_x509_certificate(pem_or_der)
    else:
        certificate = x509.load_der_x509_certificate(pem_or_der)
    return certificate.not_valid_after_utc.astimezone(UTC)


def probe_pod() -> dict[str, Any]:
    """The dry-run pod: a claim from a template, which sends it to the webhook."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cdo-preflight-webhook-probe", "namespace": PROBE_NAMESPACE},
        "spec": {
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "probe"}]},
                }
            ],
            "resourceClaims": [
                {"name": "probe", "resourceClaimTemplateName": "cdo-preflight-webhook-probe"}
            ],
        },
    }


# -- reading --------------------------------------------------------------------------------------


class _Reads:
    """The reads of one run, each failure named once in ``unreadable``."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.unreadable: list[str] = []

    async def attempt(self, what: str, read: Callable[[], Awaitable[bytes | None]]) -> bytes | None:
        try:
            return await read()
        except KubeApiError as exc:
            self.unreadable.append(f"{what}: {exc.message or exc.reason} ({exc.code})")
            return None

    async def get(self, resource: Resource, name: str, namespace: str = "") -> bytes | None:
        what = f"{resource.plural} {namespace + '/' if namespace else ''}{name}"
        return await self.attempt(
            what, lambda: self.client.get_or_none(resource, name, namespace=namespace)
        )


async def _api(client: KubeClient, where: str) -> ApiFacts:
    try:
        raw = await client.request("GET", "/version")
    except KubeApiError as exc:
        if exc.code == 0:
            return ApiFacts(
                where=where,
                problem=f"the Kubernetes API does not answer ({where}): {exc.message}",
            )
        return ApiFacts(where=where, problem=f"GET /version answered {exc.code}: {exc.message}")
    version = msgspec.json.decode(raw, type=VersionInfo)
    return ApiFacts(where=where, git_version=version.git_version, release=release_of(version))


async def _served(client: KubeClient) -> dict[str, list[str]]:
    wanted = {
        group_version(r): r for r in (*REQUIRED_APIS, *(api.resource for api in OPTIONAL_APIS))
    }
    served: dict[str, list[str]] = {}
    for key, resource in wanted.items():
        served[key] = sorted(await served_resources(client, resource))
    return served


async def _gpu_slices(reads: _Reads, served: dict[str, list[str]]) -> list[GpuSlice]:
    if RESOURCE_SLICES.plural not in served.get(group_version(RESOURCE_SLICES), ()):
        return []
    raw = await reads.attempt("resourceslices", lambda: reads.client.list(RESOURCE_SLICES))
    if raw is None:
        return []
    return [
        GpuSlice(node=piece.spec.node_name, devices=len(piece.spec.devices))
        for piece in msgspec.json.decode(raw, type=_Slices).items
        if piece.spec.driver == GPU_DRA_DRIVER
    ]


async def _webhook(reads: _Reads, namespace: str) -> WebhookFacts:
    raw = await reads.get(MUTATING_WEBHOOKS, WEBHOOK)
    if raw is None:
        return WebhookFacts()
    configuration = msgspec.json.decode(raw)
    hook = (configuration.get("webhooks") or [{}])[0]
    client_config = hook.get("clientConfig") or {}
    policy = hook.get("failurePolicy") or "Fail"
    url = client_config.get("url") or ""
    service = client_config.get("service") or {}
    if policy != "Ignore":
        probe, message = await _probe(reads.client)
    elif url:
        probe, message = await _review(url, client_config.get("caBundle") or "")
    else:
        probe, message = await _endpoints(reads, service, namespace)
    gate_policy = (
        await reads.get(VALIDATING_POLICIES, GATE_POLICY) is not None
        and await reads.get(POLICY_BINDINGS, GATE_POLICY) is not None
    )
    if url:
        source = f"the endpoint {url}"
        expires, problem = await _endpoint_certificate(url)
    else:
        source = f"Secret {namespace}/{WEBHOOK_SECRET}"
        expires, problem = await _secret_certificate(reads.client, namespace)
    return WebhookFacts(
        configured=True,
        failure_policy=policy,
        gate_policy=gate_policy,
        probe=probe,
        probe_message=message,
        certificate_source=source,
        certificate_expires=expires,
        certificate_problem=problem,
    )


async def _probe(client: KubeClient) -> tuple[str, str]:
    path = f"/api/v1/namespaces/{PROBE_NAMESPACE}/pods"
    try:
        await client.request("POST", path, query=[("dryRun", "All")], body=probe_pod())
    except KubeApiError as exc:
        if exc.code == 403 and "webhook" not in exc.message:
            return "forbidden", exc.message
        if exc.code == 0:
            return "not_probed", exc.message
        return "failed", exc.message
    return "admitted", ""


async def _review(url: str, ca_bundle: str) -> tuple[str, str]:
    """Send the webhook an AdmissionReview of the probe pod, as the API server would."""
    uid = str(uuid.uuid4())
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": PROBE_NAMESPACE,
            "operation": "CREATE",
            "userInfo": {"username": "cdo-preflight"},
            "object": probe_pod(),
            "dryRun": True,
        },
    }
    try:
        cadata = base64.b64decode(ca_bundle).decode() if ca_bundle else None
        context = ssl.create_default_context(cadata=cadata)
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HANDSHAKE_TIMEOUT_S)) as http,
            http.post(url, json=review, ssl=context) as response,
        ):
            body = await response.read()
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError, ssl.SSLError) as exc:
        return "failed", f"{url}: {exc!r}"
    if response.status != 200:
        return "failed", f"{url} answered HTTP {response.status}: {body[:200]!r}"
    try:
        answer = msgspec.json.decode(body).get("response") or {}
    except (msgspec.DecodeError, AttributeError):
        return "failed", f"{url} answered something other than an AdmissionReview: {body[:200]!r}"
    if answer.get("uid") != uid:
        return "failed", f"{url} answered no AdmissionReview response for the request"
    return "answered", f"{url} answered an AdmissionReview (allowed: {answer.get('allowed')})"


async def _endpoints(reads: _Reads, service: dict[str, Any], namespace: str) -> tuple[str, str]:
    """How many ready endpoints the webhook's Service has (its EndpointSlices)."""
    name = service.get("name") or WEBHOOK
    where = service.get("namespace") or namespace
    raw = await reads.attempt(
        f"endpointslices of Service {where}/{name}",
        lambda: reads.client.list(
            ENDPOINT_SLICES, namespace=where, label_selector=f"kubernetes.io/service-name={name}"
        ),
    )
    if raw is None:
        return "not_probed", f"the EndpointSlices of Service {where}/{name} could not be read"
    ready = sum(
        1
        for piece in msgspec.json.decode(raw).get("items") or ()
        for endpoint in piece.get("endpoints") or ()
        if (endpoint.get("conditions") or {}).get("ready", True)
    )
    if ready == 0:
        return "failed", f"Service {where}/{name} has no ready endpoint (no allocator pod ready)"
    return "endpoints", f"Service {where}/{name} has {ready} ready endpoints"


async def _secret_certificate(client: KubeClient, namespace: str) -> tuple[datetime | None, str]:
    try:
        raw = await client.get_or_none(SECRETS, WEBHOOK_SECRET, namespace=namespace)
    except KubeApiError as exc:
        return None, f"Secret {namespace}/{WEBHOOK_SECRET}: {exc.message} ({exc.code})"
    if raw is None:
        return None, f"Secret {namespace}/{WEBHOOK_SECRET} does not exist"
    data = (msgspec.json.decode(raw).get("data") or {}).get("tls.crt")
    if not data:
        return None, f"Secret {namespace}/{WEBHOOK_SECRET} has no tls.crt"
    try:
        return certificate_expiry(base64.b64decode(data)), ""
    except ValueError as exc:
        return None, f"Secret {namespace}/{WEBHOOK_SECRET}: tls.crt is no certificate: {exc}"


async def _endpoint_certificate(url: str) -> tuple[datetime | None, str]:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    context = ssl.create_default_context()
    # Only the certificate's dates are read here; the API server verifies it on every call.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
            _reader, writer = await asyncio.open_connection(host, port, ssl=context)
    except (OSError, TimeoutError) as exc:
        return None, f"no TLS handshake with {host}:{port}: {exc!r}"
    try:
        transport = writer.transport.get_extra_info("ssl_object")
        der = transport.getpeercert(binary_form=True) if transport is not None else None
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    if not der:
        return None, f"{host}:{port} presented no certificate"
    return certificate_expiry(der), ""


async def _nats(endpoints: Endpoints) -> NatsFacts:
    facts = NatsFacts(url=endpoints.nats_url, url_from=endpoints.nats_url_from)
    try:
        bus = await connect_nats(endpoints)
    except UnreachableError as exc:
        return msgspec.structs.replace(facts, problem=str(exc.__cause__ or exc))
    await bus.close()
    return facts


async def gather(endpoints: Endpoints, *, namespace: str) -> Facts:
    """Read everything the checks judge (see the module docstring)."""
    where = endpoints.cluster.describe() if endpoints.cluster is not None else ""
    try:
        client = await connect_kube(endpoints)
    except UnreachableError as exc:
        return Facts(api=ApiFacts(where=where, problem=str(exc)), namespace=namespace)
    try:
        api = await _api(client, where)
        if api.problem:
            return Facts(api=api, namespace=namespace)
        return await _cluster(client, endpoints, api, namespace)
    finally:
        await client.close()


async def _cluster(
    client: KubeClient, endpoints: Endpoints, api: ApiFacts, namespace: str
) -> Facts:
    reads = _Reads(client)
    try:
        served = await _served(client)
    except KubeApiError as exc:
        problem = f"discovery failed ({api.where}): {exc.message or exc.reason} ({exc.code})"
        return Facts(api=msgspec.structs.replace(api, problem=problem), namespace=namespace)
    raw_nodes = await reads.attempt("nodes", lambda: client.list(NODES))
    nodes = node_facts(raw_nodes) if raw_nodes is not None else []
    classes = []
    if DEVICE_CLASSES.plural in served.get(group_version(DEVICE_CLASSES), ()):
        for name in NVIDIA_DEVICE_CLASSES:
            if await reads.get(DEVICE_CLASSES, name) is not None:
                classes.append(name)
    workloads = [
        workload_of(resource.kind, name, await reads.get(resource, name, namespace))
        for resource, name in WORKLOADS
    ]
    facts = Facts(
        api=api,
        namespace=namespace,
        served=served,
        nodes=nodes,
        gpu_slices=await _gpu_slices(reads, served),
        nvidia_device_classes=classes,
        workloads=workloads,
        webhook=await _webhook(reads, namespace),
        unreadable=reads.unreadable,
    )
    if not facts.installed:
        return facts
    return msgspec.structs.replace(facts, nats=await _nats(endpoints))
