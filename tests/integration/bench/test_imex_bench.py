"""``python -m bench.imex`` on a small clique: every claim it allocates is prepared (the agents
grant a channel only to a pod the Placement seats on the node and the claim is reserved for), and
it ends with its RESULT line."""

from __future__ import annotations

import subprocess
import sys

RESULT_KEYS = (
    "nodes",
    "claims",
    "clique_up_s",
    "prepare_p50_ms",
    "prepare_p99_ms",
    "new_domain_ready_ms",
    "new_domain_ready_max_ms",
    "new_domain_under_1s",
    "daemon_restarts",
    "churn_leave_rejoin_s",
    "churn_readdress_s",
    "readdressed_own_restarts",
)


def test_the_imex_bench_prepares_every_claim_and_prints_its_result_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.imex", "--nodes", "3", "--claims", "6", "--domains", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    fields = dict(item.split("=", 1) for item in result.split()[1:])
    assert tuple(fields) == RESULT_KEYS
    assert (fields["nodes"], fields["claims"]) == ("3", "6")
    assert fields["daemon_restarts"] == "0"  # bring-up and churn restart no other daemon
    # The re-addressed node's own config.cfg changed: its adopted daemon restarts once.
    assert fields["readdressed_own_restarts"] == "1"
