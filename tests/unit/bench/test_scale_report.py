"""``bench.scale``'s figures without a cluster: the histogram quantile as PromQL computes it,
counters summed over their series, one table row per size, the targets' verdicts and the
RESULT keys with the size in each."""

from __future__ import annotations

import math

from bench._promtext import counter_sum, gauge_value, histogram_buckets, histogram_quantile
from bench._report import Runs
from bench.scale import SizeFigures, table, targets

EXPOSITION = """\
# HELP cdo_informer_events_total Watch events.
# TYPE cdo_informer_events_total counter
cdo_informer_events_total{resource="nodes",type="ADDED"} 3.0
cdo_informer_events_total{resource="nodes",type="MODIFIED"} 4.0
# HELP leader_election_master_status Leading.
# TYPE leader_election_master_status gauge
leader_election_master_status{name="cdo-clique-allocator"} 1.0
# HELP cdo_placement_decision_seconds Decisions.
# TYPE cdo_placement_decision_seconds histogram
cdo_placement_decision_seconds_bucket{le="0.001"} 50.0
cdo_placement_decision_seconds_bucket{le="0.0025"} 90.0
cdo_placement_decision_seconds_bucket{le="0.005"} 100.0
cdo_placement_decision_seconds_bucket{le="+Inf"} 100.0
cdo_placement_decision_seconds_count 100.0
cdo_placement_decision_seconds_sum 0.1
"""


def test_counters_sum_their_series_and_gauges_read_one() -> None:
    assert counter_sum(EXPOSITION, "cdo_informer_events") == 7.0
    assert counter_sum(EXPOSITION, "rest_client_requests") == 0.0
    assert gauge_value(EXPOSITION, "leader_election_master_status") == 1.0
    assert gauge_value(EXPOSITION, "leader_election_master_status", {"name": "other"}) is None


def test_the_quantile_interpolates_within_its_bucket_as_promql_does() -> None:
    buckets = histogram_buckets(EXPOSITION, "cdo_placement_decision_seconds")
    # rank 99 of 100 falls in (2.5 ms, 5 ms], 9 of its 10 observations in: 2.5 + 0.9 x 2.5.
    assert math.isclose(histogram_quantile(0.99, buckets), 0.00475)
    assert math.isclose(histogram_quantile(0.5, buckets), 0.001)
    assert histogram_quantile(0.99, [(0.001, 1.0), (math.inf, 3.0)]) == 0.001  # in +Inf
    assert math.isnan(histogram_quantile(0.99, []))


def _row(racks: int, *, events: float, seeds: list[float], rss: float, p99: float) -> SizeFigures:
    return SizeFigures(
        racks=racks,
        pods=racks * 18 * 4,
        requests_per_min=2.0,
        events_per_min=events,
        rss_mb={"controller": rss, "allocator": rss},
        cpu_s={"controller": 1.0, "allocator": 2.0},
        placement_p99_ms=p99,
        seeds=Runs(seeds),
        big_pods=64,
        big_s=None,
        relist_s={"controller": 1.0, "allocator": 3.0},
    )


def test_one_row_per_size_and_the_largest_judged_against_the_smallest() -> None:
    small = _row(4, events=10.0, seeds=[2.0, 4.0, 3.0], rss=100.0, p99=1.0)
    large = _row(256, events=13.0, seeds=[4.0, 4.5, 5.0], rss=1100.0, p99=4.0)
    lines = table([small, large])
    assert len(lines) == 4  # header, rule, a row per size
    assert lines[3].split()[:4] == ["256", "4608", "18432", "18432"]
    assert "t/o" in lines[3]  # the big domain that was not Ready
    verdicts = [line.split()[-1] for line in targets([small, large])]
    # events 13 > 1.2 x 10; Ready 4.5 s = 1.5 x 3 s; allocator and controller over 1 GB; p99.
    assert verdicts == ["MISSED", "met", "MISSED", "MISSED", "met"]


def test_result_keys_carry_the_size_and_leave_out_what_did_not_run() -> None:
    figures = {
        key: value
        for key, value in _row(4, events=1.0, seeds=[], rss=1.0, p99=1.0).figures()
        if value is not None
    }
    assert figures["relist_s_4"] == "3.00"
    assert figures["big_domain_ready_timed_out_4"] == "1"
    assert "seed_ready_p50_s_4" not in figures
    assert "big_domain_ready_s_4" not in figures
    assert all(key.endswith("_4") for key in figures)
