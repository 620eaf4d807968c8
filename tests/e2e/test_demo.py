"""`./task demo` runs its story to the end on a fresh nats-server and stops cleanly."""

import subprocess
import sys


def test_demo_runs_the_story_and_stops_cleanly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sim.demo", "--interval", "0.02"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "domain default/training-domain-1 Ready" in out
    assert "FAULT xid 79 fatal" in out
    assert "events published 15, received 15, dropped 0" in out
    assert "exit codes {'producer': 0, 'consumer': 0}" in out
