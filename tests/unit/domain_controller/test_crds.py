"""The CRDs come from the Structs: committed YAML in step, schema structural, writes valid."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import jsonschema
import msgspec
import pytest
import yaml
from msgspec import Meta

from services.domain_controller.status import compute_status
from shared.crds import (
    COMPUTE_DOMAINS,
    ComputeDomain,
    ComputeDomainStatus,
    Placement,
    all_crds,
    compute_domain_crd,
    placement_crd,
)
from shared.crds.openapi import CRD_DEFAULT, struct_schema
from shared.crds.render import drift, render_files

from .builders import NOW, facts, two_slice_facts

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "deploy" / "kustomize" / "base" / "crds"

SEED: dict[str, Any] = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomain",
    "metadata": {"name": "training-domain-1"},
    "spec": {"channel": {"resourceClaimTemplate": {"name": "training-domain-1-rct"}}},
}


def schema_of(crd: dict[str, Any], version: str = "") -> dict[str, Any]:
    """The schema of ``version``, by default the stored one."""
    versions = crd["spec"]["versions"]
    chosen = next(v for v in versions if v["name"] == version or (not version and v["storage"]))
    schema: dict[str, Any] = chosen["schema"]["openAPIV3Schema"]
    return schema


def all_schemas() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{crd['metadata']['name']}/{version['name']}", version["schema"]["openAPIV3Schema"])
        for crd in all_crds()
        for version in crd["spec"]["versions"]
    ]


def test_committed_yaml_matches_the_code() -> None:
    stale = drift(CRD_DIR)
    assert not stale, (
        f"{stale} drifted from shared/crds: run "
        "`python -m shared.crds --write deploy/kustomize/base/crds`"
    )
    on_disk = {path.name for path in CRD_DIR.iterdir()}
    assert on_disk == set(render_files())


def test_yaml_round_trips_to_the_definitions() -> None:
    for name, text in render_files().items():
        if name != "kustomization.yaml":
            assert yaml.safe_load(text) in all_crds()


def walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for key, child in (node.get("properties") or {}).items():
        found += walk(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        found += walk(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize(("name", "schema"), all_schemas(), ids=[n for n, _ in all_schemas()])
def test_schema_is_structural(name: str, schema: dict[str, Any]) -> None:
    for path, node in walk(schema):
        assert "type" in node, f"{path} has no type"
        assert "nullable" not in node and "anyOf" not in node and "$ref" not in node, path
        if node.get("x-kubernetes-list-type") == "map":
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in node["items"].get("required", []), f"{path}: map key {key}"


def test_names_columns_and_subresources() -> None:
    domain = compute_domain_crd()
    assert domain["metadata"]["name"] == "computedomains.resource.nvidia.com"
    versions = [(v["name"], v["served"], v["storage"]) for v in domain["spec"]["versions"]]
    assert versions == [("v1beta1", True, False), ("v1beta2", True, True)]
    assert COMPUTE_DOMAINS.version == "v1beta2"
    for version in domain["spec"]["versions"]:
        assert version["subresources"] == {"status": {}}
        columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
        assert columns == [
            ("Status", ".status.status"),
            ("Clique", ".status.clique"),
            ("Channel", ".status.channel"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    assert domain["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {
                    "namespace": "cdo-system",
                    "name": "cdo-clique-allocator",
                    "path": "/convert",
                    "port": 443,
                }
            },
        },
    }
    placement = placement_crd()
    assert placement["metadata"]["name"] == "placements.cdo.dev"
    assert placement["spec"]["versions"][0]["name"] == "v1alpha1"
    assert placement["spec"]["scope"] == "Namespaced"


def test_the_seed_manifest_fits_the_schema_and_decodes() -> None:
    jsonschema.validate(SEED, schema_of(compute_domain_crd(), "v1beta1"))
    stored = {**SEED, "apiVersion": "resource.nvidia.com/v1beta2"}
    jsonschema.validate(stored, schema_of(compute_domain_crd()))
    domain = msgspec.convert(stored, ComputeDomain)
    assert domain.template_name == "training-domain-1-rct"
    assert domain.spec.channel.allocation_mode == "Single"
    assert domain.spec.gang is None


def test_the_two_versions_differ_only_in_num_nodes() -> None:
    old = schema_of(compute_domain_crd(), "v1beta1")
    new = schema_of(compute_domain_crd(), "v1beta2")
    old_spec = dict(old["properties"]["spec"]["properties"])
    assert old_spec.pop("numNodes")["maximum"] == 100_000
    assert old_spec == new["properties"]["spec"]["properties"]
    assert old["properties"]["status"] == new["properties"]["status"]


def test_only_marked_defaults_reach_the_schema() -> None:
    spec = schema_of(compute_domain_crd())["properties"]["spec"]
    channel = spec["properties"]["channel"]["properties"]
    assert channel["allocationMode"]["default"] == "Single"
    defaults = [path for path, node in walk(schema_of(compute_domain_crd())) if "default" in node]
    assert defaults == [
        ".spec.channel.allocationMode",
        ".spec.failover.policy",
        ".spec.failover.graceSeconds",
    ]


def test_every_status_the_controller_computes_fits_the_schema() -> None:
    status_schema = schema_of(compute_domain_crd())["properties"]["status"]
    situations = [
        facts(),
        facts(placement=None, pods=(), nodes={}),
        facts(deleting=True),
        two_slice_facts(),
    ]
    for situation in situations:
        status = compute_status(situation, previous=ComputeDomainStatus(), now=NOW).status
        body = msgspec.json.decode(msgspec.json.encode(status))
        jsonschema.validate({k: v for k, v in body.items() if v is not None}, status_schema)


def placement_body(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "cdo.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": spec,
    }


def test_a_placement_as_the_allocator_writes_it_fits_and_decodes() -> None:
    body = placement_body(
        {
            "gpusPerPod": 2,
            "size": 3,
            "slices": [
                {
                    "index": 0,
                    "clique": "c.1",
                    "channel": 5,
                    "firstRank": 0,
                    "size": 2,
                    "members": [
                        {
                            "node": "n1",
                            "slot": 3,
                            "gpus": 4,
                            "pods": [{"name": "a", "rank": 0}, {"name": "b", "rank": 1}],
                        }
                    ],
                },
                {
                    "index": 1,
                    "clique": "c.2",
                    "channel": 0,
                    "firstRank": 2,
                    "size": 1,
                    "members": [
                        {"node": "m1", "slot": 0, "gpus": 2, "pods": [{"name": "c", "rank": 2}]}
                    ],
                },
            ],
        }
    )
    jsonschema.validate(body, schema_of(placement_crd()))
    spec = msgspec.convert(body, Placement).spec
    assert (spec.placed_pods, spec.cliques, spec.nodes) == (3, ("c.1", "c.2"), ("n1", "m1"))
    assert spec.all_slices[0].members[0].slot == 3


def test_a_placement_of_the_first_release_still_fits_and_reads_as_one_slice() -> None:
    body = placement_body(
        {
            "clique": "c.1",
            "channel": 5,
            "gpusPerPod": 2,
            "size": 2,
            "members": [{"node": "n1", "slot": 3, "gpus": 4, "pods": ["a", "b"]}],
        }
    )
    jsonschema.validate(body, schema_of(placement_crd()))
    (piece,) = msgspec.convert(body, Placement).spec.all_slices
    assert (piece.clique, piece.channel, piece.size, piece.placed_pods) == ("c.1", 5, 2, 2)
    assert [(p.name, p.rank) for p in piece.members[0].pods] == [("a", 0), ("b", 1)]


def test_resource_matches_the_crd() -> None:
    domain = compute_domain_crd()["spec"]
    assert (COMPUTE_DOMAINS.group, COMPUTE_DOMAINS.plural) == (
        domain["group"],
        domain["names"]["plural"],
    )


class Bounded(msgspec.Struct):
    count: Annotated[int, Meta(gt=0)]


class DefaultWithout(msgspec.Struct):
    mode: Annotated[str, Meta(extra={CRD_DEFAULT: True})]


def test_schema_generation_refuses_what_crds_cannot_say() -> None:
    with pytest.raises(TypeError, match="ge/le"):
        struct_schema(Bounded)
    with pytest.raises(ValueError, match="needs a default"):
        struct_schema(DefaultWithout)


def test_the_day_2_commands_name_the_columns_kubectl_prints() -> None:
    """docs/operations.md comments each `kubectl get` with the columns the CRD prints."""
    text = (ROOT / "docs" / "operations.md").read_text()
    for crd, command in (
        (compute_domain_crd(), "kubectl get computedomains -A"),
        (placement_crd(), "kubectl get placements.cdo.dev -A"),
    ):
        (line,) = [line for line in text.splitlines() if line.startswith(command)]
        comment = line.partition("#")[2]
        columns = [
            c["name"].upper() for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]
        ]
        named = [c.strip() for c in comment.split(" of ")[0].split(",")]
        assert named == [c for c in columns if c != "AGE"], (command, comment)
