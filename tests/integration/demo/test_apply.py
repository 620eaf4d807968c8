"""The demo applies the example manifests with the real kubectl, and, when traces are exported,
hands the ComputeDomain its trace context on the way in without touching the files."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from shared.crds import COMPUTE_DOMAINS, ComputeDomain, install_crds
from shared.crds.names import TRACE_CONTEXT_ANNOTATION
from shared.kube.client import KubeClient
from shared.kube.resources import DEPLOYMENTS
from sim.demo.story import MANIFESTS, TARGET, apply_manifests
from sim.kubeapi import KubeServer
from tests.support.conversion import conversion_webhook

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    "annotations", [{}, {TRACE_CONTEXT_ANNOTATION: TRACEPARENT}], ids=["plain", "traced"]
)
async def test_the_examples_are_applied_with_the_trace_context_when_given(
    emulator: KubeServer, kube_client: KubeClient, annotations: dict[str, str]
) -> None:
    files_before = [manifest.read_bytes() for manifest in MANIFESTS]
    async with conversion_webhook() as webhook:  # the examples are v1beta1
        await install_crds(kube_client, webhook.crds())
        await apply_manifests(str(emulator.kubeconfig), annotations)

    raw = await kube_client.get(COMPUTE_DOMAINS, TARGET.domain, namespace=TARGET.namespace)
    domain = msgspec.json.decode(raw, type=ComputeDomain)
    assert domain.metadata.annotations.get(TRACE_CONTEXT_ANNOTATION) == annotations.get(
        TRACE_CONTEXT_ANNOTATION
    )
    assert await kube_client.get_or_none(DEPLOYMENTS, "llm-training", namespace=TARGET.namespace)
    assert [manifest.read_bytes() for manifest in MANIFESTS] == files_before


def test_the_manifests_are_the_shipped_examples() -> None:
    examples = Path(__file__).resolve().parents[3] / "deploy" / "examples"
    assert (examples / "training-domain-1.yaml", examples / "llm-training.yaml") == MANIFESTS
