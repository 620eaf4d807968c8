"""``python -m bench.imex`` on a small clique: every claim it allocates is prepared (the agents
grant a channel only to a pod the Placement seats on the node and the claim is reserved for), and
it ends with its RESULT line; a new domain counts as Ready only when the domain controller's own
decision says so over what the API holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.imex import Bench, seat_one_per_node
from shared.crds import install_crds
from shared.crds.names import CLIQUE_LABEL, IMEX_READY_CONDITION
from shared.kube.client import KubeClient
from shared.kube.resources import NODES
from sim.kubeapi import serve

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


async def imex_ready(client: KubeClient, node: str, status: str) -> None:
    """The node's ``cdo.dev/ImexReady`` as its agent writes it (a strategic merge by type)."""
    condition = {"type": IMEX_READY_CONDITION, "status": status, "reason": "ImexReady"}
    await client.patch(
        NODES,
        node,
        {"status": {"conditions": [condition]}},
        subresource="status",
        patch_type="strategic",
    )


async def test_a_new_domain_is_ready_when_the_domain_controller_would_say_so(
    tmp_path: Path,
) -> None:
    async with serve(kubeconfig=tmp_path / "kubeconfig") as server:
        client = await KubeClient.connect(kubeconfig=server.kubeconfig)
        try:
            await install_crds(client)
            bench = Bench(client, tmp_path, 3)
            await bench.register_nodes()
            domain = await bench.create_domain("job-0", 100)
            pods = seat_one_per_node("job-0", bench.topology.nodes)
            await bench.place(*domain, channel=100, pods=pods)
            everyone = {pod.name for pod in pods}
            # No agent has reported yet: every pod running is not enough.
            assert (await bench.domain_ready("job-0", pods, everyone)).startswith("ImexNotReady")
            for node in bench.topology.nodes:
                await imex_ready(client, node.name, "True")
            # IMEX ready everywhere (as on a running clique, before the domain existed), but one
            # prepare has not returned: its pod does not run yet.
            waiting = await bench.domain_ready("job-0", pods, everyone - {pods[0].name})
            assert waiting.startswith("PodsNotRunning"), waiting
            assert await bench.domain_ready("job-0", pods, everyone) == ""
            # A member whose fabric is lost (its clique label gone) leaves the domain not Ready.
            lost = pods[1].node.name
            await client.patch(NODES, lost, {"metadata": {"labels": {CLIQUE_LABEL: None}}})
            out = await bench.domain_ready("job-0", pods, everyone)
            assert out.startswith("NodeOutOfClique") and lost in out, out
        finally:
            await client.close()
