"""The story's fixed parts: what the example manifests create, and which member the fault hits."""

from __future__ import annotations

import pytest
import yaml

from sim.demo.kubectl import file_args
from sim.demo.monitor import StoryError
from sim.demo.story import MANIFESTS, TARGET, pick_member


def test_the_target_is_what_the_example_manifests_create() -> None:
    documents = [yaml.safe_load(path.read_text()) for path in MANIFESTS]
    domain, deployment = documents
    assert domain["kind"] == "ComputeDomain"
    assert domain["metadata"]["name"] == TARGET.domain
    assert deployment["kind"] == "Deployment"
    assert deployment["spec"]["replicas"] == TARGET.replicas
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert TARGET.selector == ",".join(f"{k}={v}" for k, v in labels.items())
    assert "namespace" not in domain["metadata"] and "namespace" not in deployment["metadata"]
    assert TARGET.namespace == "default"


def test_the_fault_hits_the_middle_member() -> None:
    members = [f"rack-1-tray{i:02d}" for i in range(18)]
    assert pick_member(members) == "rack-1-tray09"
    assert pick_member(["only"]) == "only"
    with pytest.raises(StoryError):
        pick_member([])


def test_kubectl_gets_every_file_in_order() -> None:
    assert file_args(MANIFESTS) == ["-f", str(MANIFESTS[0]), "-f", str(MANIFESTS[1])]
    assert file_args(MANIFESTS[::-1])[1] == str(MANIFESTS[1])  # the workload deleted first
    assert file_args(()) == []
