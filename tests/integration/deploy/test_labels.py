"""Every pod template carries the recommended app.kubernetes.io labels; no selector changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.deploy.conftest import (
    COMPONENTS,
    KUSTOMIZE,
    OVERLAYS,
    Manifest,
    render,
    render_with,
    workloads,
)

RECOMMENDED = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
)
NAME = "app.kubernetes.io/name"
CDO_IMAGES = "registry.example.com/cdo/"


def rendered_sets(tmp_path: Path) -> Iterator[tuple[str, list[Manifest]]]:
    for overlay in OVERLAYS:
        yield overlay, render(KUSTOMIZE / "overlays" / overlay)
    yield "base", render(KUSTOMIZE / "base")
    yield "every component", render_with(tmp_path / "all", COMPONENTS)


def template_labels(workload: Manifest) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def test_every_pod_template_has_the_recommended_labels(tmp_path: Path) -> None:
    seen = set()
    for where, objs in rendered_sets(tmp_path):
        for workload in workloads(objs):
            name = workload["metadata"]["name"]
            labels = template_labels(workload)
            missing = [key for key in RECOMMENDED if not labels.get(key)]
            assert not missing, f"{where}: {workload['kind']} {name} lacks {missing}"
            assert labels["app.kubernetes.io/part-of"] == "cdo", (where, name)
            assert labels["app.kubernetes.io/instance"] == "cdo", (where, name)
            assert labels["app.kubernetes.io/managed-by"] == "kustomize", (where, name)
            assert labels[NAME] == workload["metadata"]["labels"][NAME] == name, (where, name)
            seen.add(name)
    # The base's workloads and the components' own (Jaeger, the NATS authenticator).
    assert {"cdo-domain-controller", "cdo-imex-agent", "cdo-jaeger", "cdo-nats-auth"} <= seen


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_cdo_pods_carry_the_version_of_their_image(overlay: str) -> None:
    checked = 0
    for workload in workloads(render(KUSTOMIZE / "overlays" / overlay)):
        containers = workload["spec"]["template"]["spec"]["containers"]
        images = [c["image"] for c in containers if c["image"].startswith(CDO_IMAGES)]
        tags = {image.rpartition(":")[2] for image in images}
        if not tags:
            continue
        assert tags == {template_labels(workload)["app.kubernetes.io/version"]}, workload
        checked += 1
    assert checked >= 5


def test_selectors_and_claim_templates_stay_as_they_were(tmp_path: Path) -> None:
    """Selectors (and a StatefulSet's volumeClaimTemplates) cannot change on upgrade: they
    match the name label alone, and claim templates carry no label."""
    for where, objs in rendered_sets(tmp_path):
        for obj in objs:
            spec = obj.get("spec")
            if not isinstance(spec, dict):
                continue
            name = obj["metadata"]["name"]
            if obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "PodDisruptionBudget"):
                assert set(spec["selector"]["matchLabels"]) == {NAME}, (where, name)
                assert "matchExpressions" not in spec["selector"], (where, name)
            if obj["kind"] == "Service" and "selector" in spec:
                assert set(spec["selector"]) == {NAME}, (where, name)
            for claim in spec.get("volumeClaimTemplates", []):
                assert "labels" not in claim["metadata"], (where, name)
