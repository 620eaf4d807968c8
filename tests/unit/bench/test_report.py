"""The benches' shared reporting rules (``bench/_report.py``): no key for a missing figure, runs
that timed out counted apart and never as a time."""

from __future__ import annotations

import math

from bench._report import Runs, fixed, measure_table, percentile, result_line


def test_a_missing_figure_has_no_key() -> None:
    figures = [("a_s", fixed(1.234, 2)), ("b_s", fixed(None, 2)), ("c", 0), ("d", None)]
    assert result_line(figures) == "RESULT a_s=1.23 c=0"
    assert fixed(math.nan, 1) is None
    assert result_line([("e_ms", fixed(percentile([], 0.99), 1))]) == "RESULT "


def test_percentile_is_the_nearest_rank_and_nan_without_samples() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert (percentile(samples, 0.5), percentile(samples, 0.99)) == (51.0, 100.0)
    assert percentile([3.0], 0.99) == 3.0
    assert math.isnan(percentile([], 0.5))


def test_runs_that_timed_out_are_counted_apart_and_bound_the_median_from_below() -> None:
    runs = Runs([4.0, 2.0], timeouts=1)
    assert (runs.count, runs.p50, runs.low, runs.high) == (3, 3.0, 2.0, 4.0)
    assert runs.p50_at_least() == 4.0  # 2, 4 and one longer than any
    assert runs.cells() == ("3.00*", "2.00", "4.00")
    assert (runs.verdict(5.0), runs.verdict(3.5)) == ("met", "MISSED")
    none = Runs([], timeouts=2)
    assert (none.p50, none.low, none.high) == (None, None, None)
    assert none.cells() == ("-*", "-", "-")
    assert none.p50_at_least() == math.inf
    assert Runs([1.0, 2.0]).cells() == ("1.50", "1.00", "2.00")


def test_the_measure_table_pads_every_name_to_the_longest() -> None:
    assert measure_table([("a", "1 s"), ("longer", "2 s")], rule=3) == [
        "measure  value",
        "------  ---",
        "a       1 s",
        "longer  2 s",
    ]
