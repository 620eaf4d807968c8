"""Latency of the clique allocator's pod webhook: for a pod of a ComputeDomain and for a pod of
no domain (a claim template of another DRA driver).

Everything runs as separate processes, as in a cluster, and without NATS (the allocator starts
and serves without it): the API emulator (``python -m sim.kubeapi``) with cdo's CRDs, and one
clique allocator (``python -m services.clique_allocator``) serving the webhook over HTTPS with a
throwaway CA, registered with the API server beside the ``cdo-pod-gate`` admission policy, as
deploy/ installs them. A ComputeDomain and its claim template (labelled as the domain controller
labels it) and another driver's template are created first. Then, ``--requests`` times each,
one at a time:

- **webhook**: an AdmissionReview for the pod, POSTed to the webhook as the API server posts
  it; the time to its answer (the figure the RESULT keys report);
- **pod create**: the same pod created through the API server with ``dryRun=All`` (admission
  runs in full, the webhook call and the policy included; nothing is stored), and a pod with no
  claim at all, which no webhook sees, for comparison.

    python -m bench.webhook [--requests 500]

Prints a table and ends with one ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.controller import ready, start_emulator, wait_until
from bench.health import percentile
from services.clique_allocator.webhook.configuration import WEBHOOK_PATH, webhook_configuration
from shared.crds import COMPUTE_DOMAINS, install_crds
from shared.crds.names import DOMAIN_LABEL, PLACEMENT_GATE
from shared.kube.client import KubeClient
from shared.kube.resources import PODS, RESOURCE_CLAIM_TEMPLATES
from sim.kubeapi.admission.certificates import CertificateAuthority
from sim.natsserver import free_port
from sim.podgate import install_pod_gate

NAMESPACE = "default"
DOMAIN = "bench"
DOMAIN_TEMPLATE = f"{DOMAIN}-rct"
OTHER_TEMPLATE = "other-rct"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
WARMUP = 20


def template(name: str, device_class: str, labels: dict[str, str]) -> dict[str, Any]:
    request = {"name": "dev", "exactly": {"deviceClassName": device_class}}
    return {
        "apiVersion": RESOURCE_CLAIM_TEMPLATES.api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def pod(name: str, claim_template: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example.com/a:1"}]}
    if claim_template is not None:
        spec["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": claim_template}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def review(body: dict[str, Any]) -> bytes:
    """An AdmissionReview v1 for creating ``body``, as the API server sends it."""
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": NAMESPACE,
                "name": body["metadata"]["name"],
                "object": body,
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            },
        }
    ).encode()


async def timed(count: int, call: Callable[[int], Awaitable[None]]) -> list[float]:
    """Milliseconds of each of ``count`` calls, made one after the other, after a warm-up."""
    for index in range(WARMUP):
        await call(-1 - index)
    samples = []
    for index in range(count):
        started = time.perf_counter()
        await call(index)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def start_allocator(
    tmp: Path, *, kubeconfig: Path, cert: Path, key: Path, port: int, webhook_port: int
) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        # Nobody listens there: the allocator serves its webhook without NATS.
        "CDO_NATS_URL": f"nats://127.0.0.1:{free_port()}",
        "CDO_HTTP_HOST": "127.0.0.1",
        "CDO_HTTP_PORT": str(port),
        "CDO_INSTANCE": "bench",
        "CDO_LOG_LEVEL": "warning",
        "CDO_CLIQUE_ALLOCATOR_KUBECONFIG": str(kubeconfig),
        "CDO_CLIQUE_ALLOCATOR_LEASE_NAMESPACE": NAMESPACE,
        "CDO_CLIQUE_ALLOCATOR_WEBHOOK_HOST": "127.0.0.1",
        "CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT": str(webhook_port),
        "CDO_CLIQUE_ALLOCATOR_WEBHOOK_CERT_FILE": str(cert),
        "CDO_CLIQUE_ALLOCATOR_WEBHOOK_KEY_FILE": str(key),
    }
    with (tmp / "allocator.stderr").open("wb") as stderr:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.clique_allocator", env=env, stderr=stderr
        )


async def prepare(client: KubeClient, *, ca_pem: bytes, webhook_port: int) -> None:
    domain = {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": COMPUTE_DOMAINS.kind,
        "metadata": {"name": DOMAIN, "namespace": NAMESPACE},
        "spec": {"channel": {"resourceClaimTemplate": {"name": DOMAIN_TEMPLATE}}},
    }
    await client.create(COMPUTE_DOMAINS, domain, namespace=NAMESPACE)
    await client.create(
        RESOURCE_CLAIM_TEMPLATES,
        template(DOMAIN_TEMPLATE, "compute-domain-channel.cdo.dev", {DOMAIN_LABEL: DOMAIN}),
        namespace=NAMESPACE,
    )
    await client.create(
        RESOURCE_CLAIM_TEMPLATES,
        template(OTHER_TEMPLATE, "other.example.com", {}),
        namespace=NAMESPACE,
    )
    body = webhook_configuration(ca_bundle=ca_pem, url=f"https://127.0.0.1:{webhook_port}")
    await client.request("POST", MUTATING, body=body)
    await install_pod_gate(client)


def row(title: str, samples: list[float]) -> str:
    return (
        f"{title:44}{len(samples):6d}{percentile(samples, 0.5):9.2f}"
        f"{percentile(samples, 0.99):9.2f}{max(samples):9.2f}"
    )


async def run(args: argparse.Namespace) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="webhook-bench-") as directory:
        tmp = Path(directory)
        ca = CertificateAuthority("webhook-bench-ca")
        pair = ca.issue(["cdo-clique-allocator.cdo-system.svc", "127.0.0.1"])
        cert, key = tmp / "tls.crt", tmp / "tls.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        emulator, _url, kubeconfig = await start_emulator(tmp)
        port, webhook_port = free_port(), free_port()
        allocator = None
        try:
            client = await KubeClient.connect(kubeconfig=kubeconfig)
            try:
                await install_crds(client)
                allocator = await start_allocator(
                    tmp, kubeconfig=kubeconfig, cert=cert, key=key, port=port,
                    webhook_port=webhook_port,
                )  # fmt: skip
                await wait_until(lambda: ready(port), limit_s=60, what="allocator ready")
                await prepare(client, ca_pem=ca.cert_pem, webhook_port=webhook_port)
                return await measure(client, args.requests, ca.cert_pem, webhook_port)
            finally:
                await client.close()
        finally:
            for process in (allocator, emulator):
                if process is not None and process.returncode is None:
                    process.terminate()
                    await process.wait()


async def measure(client: KubeClient, requests: int, ca_pem: bytes, webhook_port: int) -> list[str]:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    webhook = f"https://127.0.0.1:{webhook_port}{WEBHOOK_PATH}"
    bodies = {
        "domain": pod("domain-pod", DOMAIN_TEMPLATE),
        "other": pod("other-pod", OTHER_TEMPLATE),
        "plain": pod("plain-pod", None),
    }
    answers: dict[str, list[float]] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        for kind in ("domain", "other"):
            body = bodies[kind]

            async def ask(_index: int, body: dict[str, Any] = body) -> None:
                async with session.post(
                    webhook, data=review(body), headers={"Content-Type": "application/json"}
                ) as response:
                    answer = await response.json()
                    assert answer["response"]["allowed"], answer

            answers[kind] = await timed(requests, ask)
    creates: dict[str, list[float]] = {}
    for kind, body in bodies.items():

        async def create(index: int, body: dict[str, Any] = body, kind: str = kind) -> None:
            named = {**body, "metadata": {**body["metadata"], "name": f"{kind}-{index + 100}"}}
            raw = await client.request(
                "POST", PODS.path(namespace=NAMESPACE), query=[("dryRun", "All")], body=named
            )
            assert (PLACEMENT_GATE.encode() in raw) == (kind == "domain"), raw[:200]

        creates[kind] = await timed(requests, create)
    return [
        f"clique allocator pod webhook, one replica, without NATS; {requests} requests each, "
        f"one at a time, after {WARMUP} to warm up",
        "",
        f"{'':44}{'n':>6}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}",
        row("webhook answer: pod of a domain (gated)", answers["domain"]),
        row("webhook answer: pod of no domain (passed)", answers["other"]),
        row("pod create (dry run): pod of a domain", creates["domain"]),
        row("pod create (dry run): pod of no domain", creates["other"]),
        row("pod create (dry run): pod without claims", creates["plain"]),
        "",
        f"RESULT webhook_p99_ms_domain_pod={percentile(answers['domain'], 0.99):.2f} "
        f"webhook_p99_ms_other_pod={percentile(answers['other'], 0.99):.2f} "
        f"webhook_p50_ms_domain_pod={percentile(answers['domain'], 0.5):.2f} "
        f"webhook_p50_ms_other_pod={percentile(answers['other'], 0.5):.2f} "
        f"create_p99_ms_domain_pod={percentile(creates['domain'], 0.99):.2f} "
        f"create_p99_ms_other_pod={percentile(creates['other'], 0.99):.2f} "
        f"create_p99_ms_plain_pod={percentile(creates['plain'], 0.99):.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--requests", type=int, default=500, help="requests of each kind")
    args = parser.parse_args()
    for line in asyncio.run(run(args)):
        print(line, flush=True)


if __name__ == "__main__":
    main()
