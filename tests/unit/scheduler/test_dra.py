"""DRA allocation on one node: DeviceClass and request CEL selectors, counts, constraints."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from sim.scheduler.cel import SelectorCache, device_activation, evaluate
from sim.scheduler.devices import DeviceRef, SliceIndex
from sim.scheduler.dra import (
    CANNOT_ALLOCATE,
    NOT_ON_NODE,
    ClaimAllocation,
    allocate_on_node,
    claim_problems,
)
from sim.scheduler.facts import NodeFacts, node_facts
from sim.scheduler.objects import DeviceClass, ResourceClaim, ResourceSlice
from tests.unit.scheduler.builders import (
    DRIVER,
    device,
    exactly,
    make_claim,
    make_class,
    make_node,
    make_slice,
)

CHANNEL = "compute-domain-channel.cdo.dev"
GPU_DRIVER = "gpu.nvidia.com"
CLASSES = {
    CHANNEL: make_class(CHANNEL, f'device.driver == "{DRIVER}"'),
    "gpu": make_class("gpu", f'device.driver == "{GPU_DRIVER}"'),
}
N1 = node_facts(make_node("n1", labels={"rack": "r1"}))
N2 = node_facts(make_node("n2", labels={"rack": "r2"}))


def index(*slices: ResourceSlice) -> SliceIndex:
    out = SliceIndex()
    for each in slices:
        out.upsert(each)
    return out


def allocate(
    claims: Sequence[ResourceClaim],
    slices: SliceIndex,
    *,
    node: NodeFacts = N1,
    in_use: Collection[DeviceRef] = (),
    classes: dict[str, DeviceClass] | None = None,
) -> tuple[ClaimAllocation, ...] | str:
    return allocate_on_node(
        claims,
        node=node,
        devices=slices.devices_for(node),
        classes=CLASSES if classes is None else classes,
        in_use=in_use,
        cache=SelectorCache(),
    )


def devices_of(outcome: tuple[ClaimAllocation, ...] | str) -> list[list[str]]:
    assert not isinstance(outcome, str), outcome
    return [[d[2] for d in each.devices] for each in outcome]


def attachment_slices() -> SliceIndex:
    return index(
        make_slice(
            "n1-channels",
            node_name="n1",
            devices=[device(f"slot-{i}", {"type": "attachment"}) for i in range(2)],
        ),
        make_slice(
            "n2-channels",
            node_name="n2",
            devices=[device("slot-0", {"type": "attachment"})],
        ),
        make_slice(
            "n1-gpus",
            node_name="n1",
            driver=GPU_DRIVER,
            devices=[
                device("gpu-0", {"index": 0, "model": "GB200", "healthy": True}),
                device("gpu-1", {"index": 1, "model": "GB200", "healthy": False}),
            ],
        ),
    )


def test_the_device_class_selects_the_driver_and_the_node_slice_supplies_the_device() -> None:
    claim = make_claim("c", requests=[exactly("slot", CHANNEL)])
    outcome = allocate([claim], attachment_slices())
    assert devices_of(outcome) == [["slot-0"]]
    assert not isinstance(outcome, str)
    allocation = outcome[0].allocation
    assert allocation is not None
    result = allocation.devices.results[0]
    assert (result.request, result.driver, result.pool, result.device) == (
        "slot",
        DRIVER,
        "n1",
        "slot-0",
    )
    selector = allocation.node_selector
    assert selector is not None
    assert selector.node_selector_terms[0].match_fields[0].values == ("n1",)


def test_devices_in_use_are_skipped_and_a_full_node_cannot_allocate() -> None:
    claim = make_claim("c", requests=[exactly("slot", CHANNEL)])
    slices = attachment_slices()
    assert devices_of(allocate([claim], slices, in_use={(DRIVER, "n1", "slot-0")})) == [["slot-1"]]
    assert allocate([claim], slices, node=N2, in_use={(DRIVER, "n2", "slot-0")}) == CANNOT_ALLOCATE


def test_only_the_candidate_nodes_slices_count() -> None:
    claim = make_claim("c", requests=[exactly("slot", CHANNEL, count=2)])
    slices = attachment_slices()
    assert devices_of(allocate([claim], slices)) == [["slot-0", "slot-1"]]
    assert allocate([claim], slices, node=N2) == CANNOT_ALLOCATE


@pytest.mark.parametrize(
    ("selectors", "expected"),
    [
        (['device.attributes["gpu.nvidia.com"].index == 1'], ["gpu-1"]),
        (['device.attributes["gpu.nvidia.com"].healthy'], ["gpu-0"]),
        (['device.attributes["gpu.nvidia.com"].model == "GB200"'], ["gpu-0"]),
        (
            [
                'device.attributes["gpu.nvidia.com"].model.startsWith("GB")',
                'device.attributes["gpu.nvidia.com"].index > 0',
            ],
            ["gpu-1"],
        ),
        # a missing attribute is a runtime error, which selects nothing
        (['device.attributes["gpu.nvidia.com"].missing == "x"'], None),
        (['has(device.attributes["gpu.nvidia.com"].missing)'], None),
    ],
)
def test_request_selectors(selectors: list[str], expected: list[str] | None) -> None:
    claim = make_claim("c", requests=[exactly("gpu", "gpu", *selectors)])
    outcome = allocate([claim], attachment_slices())
    if expected is None:
        assert outcome == CANNOT_ALLOCATE
    else:
        assert devices_of(outcome) == [expected]


def test_all_mode_takes_every_matching_device_or_none() -> None:
    claim = make_claim("c", requests=[exactly("gpus", "gpu", mode="All")])
    slices = attachment_slices()
    assert devices_of(allocate([claim], slices)) == [["gpu-0", "gpu-1"]]
    assert allocate([claim], slices, in_use={(GPU_DRIVER, "n1", "gpu-1")}) == CANNOT_ALLOCATE
    assert allocate([claim], slices, node=N2) == CANNOT_ALLOCATE  # nothing matches there


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    request = {
        "name": "want",
        "firstAvailable": [
            {"name": "two-gpus", "deviceClassName": "gpu", "count": 2},
            {"name": "one-slot", "deviceClassName": CHANNEL},
        ],
    }
    claim = make_claim("c", requests=[request])
    slices = attachment_slices()
    outcome = allocate([claim], slices)
    assert devices_of(outcome) == [["gpu-0", "gpu-1"]]
    outcome = allocate([claim], slices, in_use={(GPU_DRIVER, "n1", "gpu-0")})
    assert devices_of(outcome) == [["slot-0"]]
    assert not isinstance(outcome, str)
    assert outcome[0].allocation is not None
    assert outcome[0].allocation.devices.results[0].request == "want/one-slot"


def test_match_attribute_constraint_backtracks_to_a_consistent_set() -> None:
    slices = index(
        make_slice(
            "n1-gpus",
            node_name="n1",
            driver=GPU_DRIVER,
            devices=[
                device("gpu-0", {"nvlink": "x"}),
                device("gpu-1", {"nvlink": "y"}),
                device("gpu-2", {"nvlink": "y"}),
            ],
        )
    )
    claim = make_claim(
        "c",
        requests=[exactly("a", "gpu"), exactly("b", "gpu")],
        constraints=[{"matchAttribute": f"{GPU_DRIVER}/nvlink"}],
    )
    assert devices_of(allocate([claim], slices)) == [["gpu-1", "gpu-2"]]
    missing = make_claim(
        "c",
        requests=[exactly("a", "gpu")],
        constraints=[{"matchAttribute": f"{GPU_DRIVER}/absent"}],
    )
    assert allocate([missing], slices) == CANNOT_ALLOCATE


def test_a_narrow_request_is_not_starved_by_a_broad_one_before_it() -> None:
    claim = make_claim(
        "c",
        requests=[
            exactly("any", "gpu"),
            exactly("healthy", "gpu", 'device.attributes["gpu.nvidia.com"].healthy'),
        ],
    )
    assert devices_of(allocate([claim], attachment_slices())) == [["gpu-1", "gpu-0"]]


def test_two_claims_of_one_pod_never_share_a_device() -> None:
    first = make_claim("c1", requests=[exactly("slot", CHANNEL)])
    second = make_claim("c2", requests=[exactly("slot", CHANNEL)])
    slices = attachment_slices()
    assert devices_of(allocate([first, second], slices)) == [["slot-0"], ["slot-1"]]
    assert allocate([first, second], slices, node=N2) == CANNOT_ALLOCATE


def test_an_allocated_claim_is_reused_only_where_its_node_selector_allows() -> None:
    allocated = make_claim(
        "c",
        requests=[exactly("slot", CHANNEL)],
        allocation={
            "devices": {
                "results": [{"request": "slot", "driver": DRIVER, "pool": "n1", "device": "slot-0"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        },
    )
    slices = attachment_slices()
    outcome = allocate([allocated], slices, in_use={(DRIVER, "n1", "slot-0")})
    assert not isinstance(outcome, str)
    assert outcome[0].allocation is None  # nothing new to write
    assert allocate([allocated], slices, node=N2) == NOT_ON_NODE


def test_all_nodes_and_node_selector_slices() -> None:
    slices = index(
        make_slice("shared", all_nodes=True, pool="fabric", devices=[device("link-0")]),
        make_slice(
            "rack1",
            pool="rack1",
            node_selector={
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                ]
            },
            devices=[device("switch-0")],
        ),
    )
    claim = make_claim("c", requests=[exactly("x", CHANNEL, mode="All")])
    outcome = allocate([claim], slices, node=N1)
    assert devices_of(outcome) == [["link-0", "switch-0"]]
    assert devices_of(allocate([claim], slices, node=N2)) == [["link-0"]]
    only_shared = allocate([claim], slices, node=N2)
    assert not isinstance(only_shared, str)
    assert only_shared[0].allocation is not None
    assert only_shared[0].allocation.node_selector is None  # usable from any node


def test_only_the_newest_generation_of_a_pool_is_used() -> None:
    slices = index(
        make_slice("old", node_name="n1", pool="p", generation=1, devices=[device("old-0")]),
        make_slice("new", node_name="n1", pool="p", generation=2, devices=[device("new-0")]),
    )
    claim = make_claim("c", requests=[exactly("x", CHANNEL, mode="All")])
    assert devices_of(allocate([claim], slices)) == [["new-0"]]
    slices.delete("new")
    assert devices_of(allocate([claim], slices)) == [["old-0"]]


def test_class_configuration_is_recorded_with_the_allocation() -> None:
    classes = {
        CHANNEL: make_class(
            CHANNEL, "true", config=[{"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]
        )
    }
    claim = make_claim("c", requests=[exactly("slot", CHANNEL)])
    outcome = allocate([claim], attachment_slices(), classes=classes)
    assert not isinstance(outcome, str)
    allocation = outcome[0].allocation
    assert allocation is not None
    config = allocation.devices.config
    assert [(c.source, c.requests) for c in config] == [("FromClass", ("slot",))]


def test_claim_problems_name_what_no_node_can_fix() -> None:
    assert claim_problems(make_claim("c", requests=[exactly("slot", CHANNEL)]), CLASSES) == []
    missing = make_claim("c", requests=[exactly("slot", "nope")])
    assert claim_problems(missing, CLASSES) == ["request slot: device class nope does not exist"]
    broken = make_claim("c", requests=[exactly("slot", CHANNEL, "device.driver ==")])
    (problem,) = claim_problems(broken, CLASSES)
    assert problem.startswith("request slot: selector compilation failed")


def test_cel_activation_groups_attributes_by_domain() -> None:
    activation = device_activation(
        driver=DRIVER, attributes={DRIVER: {"type": "attachment", "slot": 3}}, capacity={}
    )
    assert evaluate(f'device.attributes["{DRIVER}"].slot == 3', activation).matched
    outcome = evaluate("device.driver", activation)
    assert not outcome.matched
    assert "bool" in outcome.error


def test_selector_results_are_cached_per_device_content() -> None:
    cache = SelectorCache()
    claim = make_claim("c", requests=[exactly("slot", CHANNEL)])
    slices = attachment_slices()
    sizes = []
    for node in (N1, N2):
        allocate_on_node(
            [claim],
            node=node,
            devices=slices.devices_for(node),
            classes=CLASSES,
            in_use=(),
            cache=cache,
        )
        sizes.append(len(cache))
    # On n1: one entry for both identical slots, one per GPU. n2's slot has the same content as
    # n1's, so it is judged without evaluating anything again.
    assert sizes == [3, 3]
