"""``bench.e2e``'s stage breakdown: milestones from the pod versions the watch delivered, each
stage's time, the slowest pod, and cdo's share of the pods' time to Running."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bench._e2e_stages import (
    CDI_DEVICES_ANNOTATION,
    MILESTONES,
    Breakdown,
    PodStages,
    Sightings,
    breakdown_rows,
    cdo_share_pct,
    filled,
    pod_stages,
    shown,
)
from shared.crds.names import PLACEMENT_GATE
from shared.kube.models import Pod


def pod(
    name: str = "p",
    *,
    gated: bool = True,
    node: str = "",
    prepared: bool = False,
    phase: str = "Pending",
) -> Pod:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": {CDI_DEVICES_ANNOTATION: '["x"]'} if prepared else {},
        },
        "spec": {
            "schedulingGates": [{"name": PLACEMENT_GATE}] if gated else [],
            "nodeName": node,
        },
        "status": {"phase": phase},
    }
    return msgspec.convert(body, Pod)


def test_each_version_shows_the_milestones_it_has_passed() -> None:
    assert shown(pod()) == {"admitted"}
    assert shown(pod(gated=False)) == {"admitted", "placed"}
    assert shown(pod(gated=False, node="n1")) == {"admitted", "placed", "bound"}
    assert shown(pod(gated=False, node="n1", prepared=True, phase="Running")) == {
        "admitted",
        "placed",
        "bound",
        "prepared",
        "running",
    }


def test_a_milestone_not_seen_takes_the_next_ones_time_and_none_goes_back() -> None:
    # "placed" and "bound" arrived in one version; "prepared" never on its own.
    seen = {"admitted": 1.0, "placed": 3.0, "bound": 3.0, "running": 5.0}
    assert filled(seen) == {
        "admitted": 1.0,
        "placed": 3.0,
        "bound": 3.0,
        "prepared": 5.0,
        "running": 5.0,
    }
    assert filled({"admitted": 1.0, "placed": 2.0}) is None  # never Running: no stages


def watched() -> Sightings:
    """Two pods of one gang, as the watch saw them (perf_counter seconds, apply at 100)."""
    sightings = Sightings()
    for at, version in [
        (100.2, pod("a")),
        (100.5, pod("b")),
        (100.8, pod("a", gated=False)),
        (100.8, pod("b", gated=False)),
        (100.9, pod("a", gated=False, node="n1")),
        (101.0, pod("b", gated=False, node="n2")),
        (101.3, pod("a", gated=False, node="n1", prepared=True)),
        (101.4, pod("a", gated=False, node="n1", prepared=True, phase="Running")),
        (123.0, pod("b", gated=False, node="n2", prepared=True)),
        (123.1, pod("b", gated=False, node="n2", prepared=True, phase="Running")),
    ]:
        sightings.see(version, at)
    return sightings


def stages() -> list[PodStages]:
    return pod_stages(
        watched(), origin=100.0, webhook_s=0.05, prepare_s={"n1": 0.1, "n2": 0.5, "n3": 9.0}
    )


def test_stages_from_the_watched_versions_and_the_services_timings() -> None:
    a, b = sorted(stages(), key=lambda p: p.name)
    assert a.node == "n1" and b.node == "n2"
    assert a.at["created"] == pytest.approx(0.15)  # admitted less the webhook's answer
    assert [round(a.stage(m), 2) for m in MILESTONES] == [0.15, 0.05, 0.6, 0.1, 0.4, 0.1]
    assert a.to_running_s == pytest.approx(1.4)
    assert a.life_s == pytest.approx(1.25)
    # b's 22 s went to "prepared": bound at 1.0, its CDI ids written at 23.0.
    assert b.stage("prepared") == pytest.approx(22.0)
    assert b.prepare_s == 0.5


def test_the_prepare_is_at_most_the_stage_it_is_part_of() -> None:
    (only,) = pod_stages(watched(), origin=100.0, webhook_s=0.0, prepare_s={"n1": 9.0})[:1]
    assert only.prepare_s == pytest.approx(only.stage("prepared"))


def test_the_breakdown_names_the_slowest_pod_and_the_medians() -> None:
    breakdown = Breakdown(tuple(stages()))
    slowest = breakdown.slowest
    assert slowest is not None and slowest.name == "b"
    assert breakdown.to_running_max == pytest.approx(23.1)
    assert breakdown.p50("bound") == pytest.approx(0.15)  # 0.1 and 0.2
    rows = breakdown_rows("(a) seed", breakdown)
    assert rows[0] == "(a) seed"
    p50 = ["0.30", "0.05", "0.45", "0.15", "11.20", "0.10", "0.30", "12.25"]
    assert rows[1].split() == ["p50", "of", "pods", "2", *p50]
    # The slowest pod: its stages, its IMEX prepare, its time to Running, its name and node.
    slowest_stages = ["0.45", "0.05", "0.30", "0.20", "22.00", "0.10", "0.50", "23.10"]
    assert rows[2].split() == ["slowest", "pod", *slowest_stages, "b", "on", "n2"]


def test_an_empty_breakdown_has_no_figures() -> None:
    breakdown = Breakdown(())
    assert breakdown.slowest is None and breakdown.to_running_max is None
    assert breakdown.to_running_p50 is None
    assert breakdown.p50("placed") is None
    assert breakdown_rows("x", breakdown)[1].split() == ["p50", "of", "pods", "0"] + ["-"] * 8


def test_cdos_share_counts_the_webhook_the_allocator_and_the_prepare() -> None:
    a, b = sorted(stages(), key=lambda p: p.name)
    assert a.cdo_s == pytest.approx(0.05 + 0.6 + 0.1)
    assert b.cdo_s == pytest.approx(0.05 + 0.3 + 0.5)
    share = cdo_share_pct([a, b])
    assert share == pytest.approx(100 * (0.75 + 0.85) / (a.life_s + b.life_s))
    assert cdo_share_pct([]) is None
