"""The multi-clique act's fixed parts: what its example manifests create, and the check of the
slices the allocator made."""

from __future__ import annotations

import yaml

from sim.demo.observe import SliceView
from sim.demo.spanning import SPAN_MANIFESTS, SPAN_TARGET, slice_problems
from sim.demo.story import MANIFESTS

A = "18acb9ea-5edc-5d25-b92e-9a65573d239b.1"
B = "ce39c142-0e56-575d-8cdf-26168a499808.1"


def rack(number: int, trays: int = 18) -> tuple[str, ...]:
    return tuple(f"rack-{number}-tray{i:02d}" for i in range(trays))


CLIQUES = dict.fromkeys(rack(1), A) | dict.fromkeys(rack(2), B)


def piece(
    index: int, clique: str, first: int, nodes: tuple[str, ...], *, channel: int = 0
) -> SliceView:
    size = len(nodes)
    return SliceView(
        index=index,
        clique=clique,
        channel=channel,
        first_rank=first,
        size=size,
        nodes=nodes,
        pods=size,
    )


def test_the_target_is_what_the_example_manifests_create() -> None:
    domain, job = (yaml.safe_load(path.read_text()) for path in SPAN_MANIFESTS)
    assert domain["kind"] == "ComputeDomain"
    assert domain["metadata"]["name"] == SPAN_TARGET.domain
    assert domain["spec"]["gang"] == {"sliceSize": 18}
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == SPAN_TARGET.replicas
    template = job["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert SPAN_TARGET.selector == ",".join(f"{k}={v}" for k, v in labels.items())
    (claim,) = template["spec"]["resourceClaims"]
    rct = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert claim["resourceClaimTemplateName"] == rct
    assert "affinity" not in template["spec"]  # a clique affinity would hold it in one clique
    assert "namespace" not in domain["metadata"] and "namespace" not in job["metadata"]
    assert SPAN_TARGET.namespace == "default"


def test_the_act_uses_its_own_examples_and_another_domain_than_the_seed() -> None:
    assert not set(SPAN_MANIFESTS) & set(MANIFESTS)
    assert all(path.is_file() for path in SPAN_MANIFESTS)
    assert SPAN_TARGET.domain != "training-domain-1"


def test_one_slice_per_rack_with_consecutive_ranks_is_right() -> None:
    slices = [piece(0, A, 0, rack(1)), piece(1, B, 18, rack(2), channel=3)]
    assert slice_problems(slices, CLIQUES, pods=36) == []


def test_gaps_missing_pods_and_a_short_cover_are_reported() -> None:
    short = SliceView(index=1, clique=B, channel=0, first_rank=20, size=16, nodes=rack(2)[:16])
    problems = slice_problems([piece(0, A, 0, rack(1)), short], CLIQUES, pods=36)
    assert problems == [
        "slice 1 starts at rank 20, not 18",
        "slice 1 has 0 pods pinned for 16 ranks",
    ]
    assert slice_problems(
        [piece(0, A, 0, rack(1)), piece(1, B, 18, rack(2)[:17])], CLIQUES, pods=36
    ) == ["the slices cover 35 ranks, not 36"]


def test_a_node_outside_its_slice_clique_is_reported() -> None:
    mixed = (*rack(1)[:17], rack(2)[0])
    problems = slice_problems(
        [piece(0, A, 0, mixed), piece(1, B, 18, rack(2)[1:] + rack(1)[17:])], CLIQUES, pods=36
    )
    assert problems == [
        "slice 0 has nodes outside clique " + A + ": rack-2-tray00",
        "slice 1 has nodes outside clique " + B + ": rack-1-tray17",
    ]


def test_one_clique_only_or_two_channels_in_one_clique_are_wrong() -> None:
    halves = [piece(0, A, 0, rack(1)[:9]), piece(1, A, 9, rack(1)[9:], channel=1)]
    assert slice_problems(halves, CLIQUES, pods=18) == [
        f"clique {A} has several channels: [0, 1]",
        "the domain is in one clique only",
    ]
    assert slice_problems([], CLIQUES, pods=36) == ["the Placement has no slices"]
