"""``python -m bench.scale`` on one small rack, the whole system brought up by the bench itself:
it loads the cluster, times its domains, reads the per-node services' and the control plane's
own metrics, restarts the control plane, and prints one table row for the size and every
RESULT key with the size in it (about 35 s on two shared cores). The table of several sizes and
the targets' verdicts are tested without a cluster (tests/unit/bench/test_scale_report.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

KEYS = (
    "nodes",
    "pods",
    "gpus",
    "agent_api_requests_per_min",
    "agent_watch_events_per_min",
    "controller_rss_mb",
    "controller_cpu_s",
    "allocator_rss_mb",
    "allocator_cpu_s",
    "placement_p99_ms",
    "seed_ready_p50_s",
    "seed_ready_max_s",
    "big_domain_pods",
    "big_domain_ready_s",
    "controller_relist_s",
    "allocator_relist_s",
    "relist_s",
    "nats_in_msgs_per_s",
    "nats_stored_msgs",
    "nats_stored_bytes",
    "nats_connections",
)


@pytest.mark.slow
def test_the_scale_bench_prints_a_row_and_every_key_for_its_size() -> None:
    command = [sys.executable, "-m", "bench.scale", "--racks", "1", "--seeds", "1"]
    command += ["--pods-per-node", "0.5", "--big-pods", "9", "--window", "2", "--timeout", "60"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["racks", "nodes"])
    row = lines[header + 2].split()
    assert row[:4] == ["1", "18", "9", "72"]  # racks, nodes, the load's pods, GPUs
    (result,) = [line for line in lines if line.startswith("RESULT ")]
    fields = dict(item.split("=", 1) for item in result.split()[1:])
    assert tuple(fields) == tuple(f"{key}_1" for key in KEYS)
    assert (fields["big_domain_pods_1"], fields["pods_1"]) == ("9", "9")
    # The node's services made requests in the window (the domain ran on their rack), and
    # both control-plane services came back leading after the restart.
    assert float(fields["agent_api_requests_per_min_1"]) > 0
    assert float(fields["relist_s_1"]) > 0
    assert "targets:" in done.stdout
