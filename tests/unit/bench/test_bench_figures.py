"""The RESULT figures of ``bench.kubeapi`` and ``bench.ui``: a key for what was measured, named
for what was measured, and none for what was not."""

from __future__ import annotations

import argparse
import math

from bench import kubeapi, ui
from bench._report import result_line


def fan(lag_p99_ms: float, *, received: float) -> dict[str, float]:
    return {
        "list_ms": 400.0,
        "paged_s": 0.9,
        "by_node": 0.004,
        "create_pods_per_s": 800.0,
        "write_rate": 990.0,
        "events_per_s": 9900.0 if received else 0.0,
        "lag_p50_ms": lag_p99_ms / 2,
        "lag_p99_ms": lag_p99_ms,
        "lag_max_ms": lag_p99_ms,
        "complete": 1.0 if received else 0.0,
        "received": received,
        "writes": 5000.0,
        "rss_end": 300.0,
    }


def test_the_watch_lag_of_no_event_received_has_no_key_and_says_so() -> None:
    args = argparse.Namespace(pods=20000, watchers=10, rate=1000.0)
    line = result_line(kubeapi.figures(args, fan(12.0, received=50000), fan(math.nan, received=0)))
    pairs = dict(pair.split("=") for pair in line.removeprefix("RESULT ").split())
    assert pairs["watch_lag_p99_ms"] == "12"
    assert "watch_lag_p99_authz_ms" not in pairs  # not 0: nothing was received to time
    assert pairs["watchers_kept_up_authz"] == "0"
    assert pairs["list_20k_pods_authz_ms"] == "400"
    rows = dict(kubeapi.fan_rows(fan(math.nan, received=0), args, ", RBAC").rows)
    assert rows["delivery lag p50 / p99 / max, RBAC"] == "- / - / - (no event received)"


def test_the_cluster_size_keys_name_the_racks_and_are_absent_when_skipped() -> None:
    args = argparse.Namespace(pods=20000, watchers=10, rate=1000.0, scale_racks=256)
    scale = {
        "create_nodes_s": 1.5,
        "create_pods_s": 10.0,
        "list_pods_ms": 219.0,
        "by_node_ms": 0.41,
        "by_clique_ms": 0.3,
        "fan_open_s": 4.5,
        "fan_events_per_s": 1910.0,
        "fan_lag_p99_ms": math.nan,  # nothing received: no key
        "fan_complete": 0.0,
        "webhook_pods_per_s": 955.0,
        "rss_end": 311.0,
    }
    on = off = fan(12.0, received=50000)
    pairs = dict(
        pair.split("=") for pair in result_line(kubeapi.figures(args, off, on, scale)).split()[1:]
    )
    assert pairs["list_pods_by_node_ms_256racks"] == "0.4"
    assert pairs["watchers_kept_up_256racks"] == "0"
    assert "watch_lag_p99_ms_256racks" not in pairs
    assert pairs["watch_lag_p99_ms"] == "12"  # the existing keys stay as they were
    skipped = result_line(kubeapi.figures(args, off, on))
    assert "racks=" not in skipped


def test_the_first_paint_key_names_the_racks_drawn() -> None:
    default = argparse.Namespace(racks=256, event_p99=41.2, first_paint=1830.4)
    assert result_line(ui.figures(default)) == (
        "RESULT ui_event_to_paint_p99_ms=41 ui_first_paint_ms_256racks=1830"
    )
    small = argparse.Namespace(racks=8, event_p99=41.2, first_paint=120.0)
    assert result_line(ui.figures(small)) == (
        "RESULT ui_event_to_paint_p99_ms=41 ui_first_paint_ms_8racks=120"
    )
