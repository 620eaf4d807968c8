"""``python -m sim`` as a user runs it: up, status, power off/on, kubectl against it, clean stop."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for_sync

KUBECTL = Path(sys.executable).parent / "kubectl"


def sim(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sim", "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_up_status_power_and_stop(tmp_path: Path) -> None:
    # The kubelets' unix sockets live below the state directory: keep its path short.
    state = Path(tempfile.mkdtemp(prefix="cdo-cli-"))
    cluster = ProgramProcess(
        "sim", "--state-dir", str(state), "up", "--label-cliques", env={}, workdir=tmp_path
    ).start()
    try:
        wait_for_sync(
            lambda: (state / "cluster.json").exists() or cluster.returncode is not None,
            timeout=60,
            what="cluster up",
        )
        assert cluster.returncode is None, cluster.stderr_text()
        info = json.loads((state / "cluster.json").read_text())
        nodes = subprocess.run(
            [str(KUBECTL), "--kubeconfig", info["kubeconfig"], "get", "nodes", "-o", "name"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.split()  # fmt: skip
        assert len(nodes) == 36

        result = sim(state, "power", "off", "rack-0-tray05")
        assert result.returncode == 0, result.stderr
        status = sim(state, "status")
        assert "OFF rack-0-tray05" in status.stdout
        assert status.stdout.count(" on ") == 35
        assert sim(state, "power", "on", "rack-0-tray05").returncode == 0
        unknown = sim(state, "power", "off", "no-such-node")
        assert unknown.returncode != 0 and "no node" in unknown.stderr

        cluster.send(signal.SIGTERM)
        assert cluster.wait(timeout=30) == 0
        assert not (state / "cluster.json").exists()
    finally:
        cluster.stop()
    gone = sim(state, "status")
    assert gone.returncode != 0 and "no simulated cluster" in gone.stderr
    shutil.rmtree(state, ignore_errors=True)


def test_a_bad_topology_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes_per_rack: 40\n")
    result = sim(tmp_path, "up", "--topology", str(bad))
    assert result.returncode != 0
    assert "nodes_per_rack" in result.stderr
