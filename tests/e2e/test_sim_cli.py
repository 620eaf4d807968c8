"""``python -m sim`` as a user runs it: up, status, power off/on, kubectl against it, clean stop;
and ``cdo explain`` / ``cdo top cliques`` (also as ``kubectl cdo``) and ``cdo preflight`` on the
whole system, with nodes set into the states a platform team meets (the host's IMEX service,
CDI off, no IMEX programs) and NATS that does not answer."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from shared.crds.names import PLACED_CONDITION
from sim.natsserver import free_port
from tests.e2e.whole_system import SYSTEM_STEP_S, WholeSystem, gated, running_whole_system
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for, wait_for_sync

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


async def kubectl_cdo(kubeconfig: str, state: Path, *args: str) -> str:
    """``kubectl cdo ARGS``: the real kubectl finding the plugin on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "CDO_NATS_URL"}
    env["PATH"] = f"{KUBECTL.parent}{os.pathsep}{env.get('PATH', '')}"
    env["KUBECONFIG"] = kubeconfig  # kubectl takes no flags before a plugin's name
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "cdo", *args, "--state-dir", str(state),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, f"kubectl cdo {' '.join(args)}: {err.decode()}"
    return out.decode()


async def preflight_says(
    system: WholeSystem, check: str, status: str, *, naming: str
) -> dict[str, str]:
    """Wait until ``cdo preflight``'s ``check`` has ``status`` and names ``naming``."""

    async def probe() -> dict[str, str] | None:
        _code, checks = await system.preflight()
        found = checks[check]
        return found if found["status"] == status and naming in found["message"] else None

    return await wait_for(probe, timeout=SYSTEM_STEP_S, interval=0.5, what=f"{check} {status}")


async def check_preflight(system: WholeSystem) -> None:
    code, checks = await system.preflight()
    assert code == 0, {name: (c["status"], c["message"]) for name, c in checks.items()}
    # The simulator registers it by URL, failurePolicy Ignore as deploy/: sent a review.
    assert checks["webhook"]["message"].startswith("the pod webhook answers: https://127.0.0.1:")
    assert "valid for 364 days" in checks["webhook-certificate"]["message"]
    assert checks["services"]["status"] == "skip"  # the simulator runs them as processes
    assert checks["cdi"]["message"] == "CDI is on in the container runtime of all 36 nodes"

    node = "rack-0-tray01"
    for fault, check in (
        (("--host-imex-service", "on"), "host-imex-service"),
        (("--cdi", "off"), "cdi"),
        (("--imex-programs", "missing"), "imex-programs"),
    ):
        await system.cdo("sim", "fault", node, *fault)
        found = await preflight_says(system, check, "fail", naming=node)
        assert found["hint"]
        code, _checks = await system.preflight()
        assert code == 2
    await system.cdo("sim", "fault", node, "--host-imex-service", "off")
    await system.cdo("sim", "fault", node, "--cdi", "on")
    await system.cdo("sim", "fault", node, "--imex-programs", "installed")
    await preflight_says(system, "imex-ready", "ok", naming="36 of 36")

    code, checks = await system.preflight("--nats-url", f"nats://127.0.0.1:{free_port()}")
    assert code == 1 and checks["nats"]["status"] == "warn"
    assert "does not answer" in checks["nats"]["message"]


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_explain_top_and_preflight_on_the_whole_system() -> None:
    # The default two racks (on an address block of their own, as every whole system here).
    async with running_whole_system() as system:
        await check_preflight(system)
        await system.create_namespace("why")
        await system.create_workload("why", "small", replicas=2, gpus=4)
        # 40 pods of 4 GPUs: more than the 144 GPUs of the two racks.
        await system.create_workload("why", "huge", replicas=40, gpus=4)
        await system.wait_domain_ready("why", "small", nodes=2)

        async def held() -> bool | None:
            pods = await system.pods("why", "app=huge")
            reasons = {
                c.reason for pod in pods if gated(pod) and (c := pod.condition(PLACED_CONDITION))
            }
            return True if len(pods) == 40 and reasons == {"LargerThanCluster"} else None

        await wait_for(held, timeout=SYSTEM_STEP_S, interval=0.3, what="huge held")

        ready = await system.cdo("explain", "small", "-n", "why")
        assert ready.startswith("computedomain why/small: Ready\n")
        assert "nothing waits" in ready
        assert "huge" not in ready  # another domain's events are not this one's
        members = [line.split() for line in ready.split("NODES (members")[1].splitlines()[2:4]]
        assert [row[2:6] for row in members] == [["True", "True", "True", "UP"]] * 2
        assert "note:" not in ready

        huge = json.loads(await system.cdo("explain", "huge", "-A", "-o", "json"))
        assert huge["phase"] == "Pending"
        (finding,) = [f for f in huge["findings"] if f["topic"] == "placement"]
        assert finding["reason"] == "LargerThanCluster"
        assert finding["subject"].startswith("pods huge-")
        assert {c["source"] for c in huge["cliques"]} == {"snapshot"}

        top = json.loads(await system.cdo("top", "cliques", "-o", "json"))
        assert [(c["gpus_total"], c["source"]) for c in top["cliques"]] == [(72, "snapshot")] * 2
        assert sum(c["gpus_free"] for c in top["cliques"]) == 144 - 8

        pod = (await system.pods("why", "app=huge"))[0].metadata.name
        text = await kubectl_cdo(str(system.kubeconfig), system.state_dir, "explain",
                                 f"pod/{pod}", "-n", "why")  # fmt: skip
        assert text.startswith(f"pod why/{pod} (of computedomain why/huge): Pending")
        assert "! LargerThanCluster (pod " in text
        await system.clean_up("why")
