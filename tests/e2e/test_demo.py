"""``./task demo`` as a user runs it: the whole story on the simulated cluster, then a clean stop.

The demo runs as a real program in a temporary state directory; the test reads its output as a
user would (the live lines and the summary: the seed act, in which no node's IMEX readiness
drops through the XID and the GPU reset; the fabric act, in which the seed's rack loses its
fabric and the domain fails over to the other rack; then the act in which one domain spans both
racks in two slices; and the IMEX daemon restarts the node host counted, none), and afterwards
checks that no process it started is left.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.wait import wait_for_sync

DEMO_TIMEOUT_S = 900  # bring-up alone can take minutes on a busy two-core machine


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has exited


def processes_naming(text: str) -> list[int]:
    """Pids of running processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in command and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def section(out: str, first: str, then: str) -> str:
    """The output from the step whose heading starts with ``first`` to the one of ``then``."""
    start = out.index(f"\n{first}")
    return out[start : out.index(f"\n{then}", start)]


def summary_rows(out: str) -> dict[str, str]:
    summary = out.rpartition("\nsummary\n")[2]
    rows = {}
    for line in summary.splitlines():
        label, _, value = line.strip().partition("  ")
        rows[label] = value.strip()
    return rows


@pytest.mark.slow
@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_the_demo_tells_the_whole_story_and_stops_everything() -> None:
    state = Path(tempfile.mkdtemp(prefix="cdo-demo-"))  # short: unix socket paths are limited
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDO_", "OTEL_"))}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "sim.demo", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=DEMO_TIMEOUT_S,
            check=False,
            env=env,
        )
        check_story(result, state)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def check_story(result: subprocess.CompletedProcess[str], state: Path) -> None:
    out = result.stdout
    assert result.returncode == 0, out + result.stderr

    assert "CDO_HEALTH_XID_LATCH_S=6, CDO_HEALTH_HOLD_DOWN_S=3" in out
    assert "computedomain.resource.nvidia.com/training-domain-1 created" in out
    assert "deployment.apps/llm-training created" in out
    assert "pods 18: gated 0 placed 18 running 18" in out
    assert "(waiting: CliqueFull)" in out
    assert "event node.fault" in out and "event node.recovered" in out

    # Through the XID and the GPU reset no other node's IMEX readiness drops, and no daemon
    # restarts (the node host's counts).
    fault_and_reset = section(out, "3. inject XID", "5. ")
    ready = [int(n) for n in re.findall(r"IMEX ready (\d+)/36 nodes", fault_and_reset)]
    assert ready and min(ready) >= 35, fault_and_reset
    assert re.search(r"IMEX ready through the fault and the reset: 3[56]/36 nodes", out), out
    assert out.count("IMEX daemon restarts so far: 0 on 36 nodes") == 2, out

    # The fabric act: the seed's rack loses its fabric, the domain's slice is stuck, moves to
    # the other rack's clique after the 5 s grace and is Ready there; the fabric comes back.
    fabric = section(out, "5. ", "7. ")
    assert "computedomain.resource.nvidia.com/training-domain-1 patched" in fabric
    assert "clique label on 18/36 nodes" in fabric
    assert "(and the like from rack-" in fabric  # one line, not one per GPU of the rack
    assert "| slice 0 stuck" in fabric
    assert re.search(r"slice 0 stuck \d+\.\d s after the fabric loss", fabric), fabric
    moved = re.search(r"slice 0 moved \d+\.\d s after the fabric loss: to clique (\S+),", fabric)
    assert moved, fabric
    assert re.search(
        r"Ready again \d+\.\d s after the fabric loss \(-?\d+\.\d s past the grace\): 18 pods "
        rf"on rack-\d, clique {re.escape(moved.group(1))}, IMEX channel \d+",
        fabric,
    ), fabric
    assert re.search(r"rack-\d back in clique \S+ \d+\.\d s after its fabric returned", fabric)
    assert re.search(r"NATS: 72 node.fault events from the 18 nodes of rack-\d", fabric), fabric

    # The multi-clique act: the seed deleted until its GPUs are free, then one domain over both
    # racks, its two slices shown as it becomes Ready.
    assert 'deployment.apps "llm-training" deleted' in out
    assert 'computedomain.resource.nvidia.com "training-domain-1" deleted' in out
    assert "training-domain-1 gone " in out
    assert "computedomain.resource.nvidia.com/training-domain-2 created" in out
    assert "job.batch/llm-training-2 created" in out
    assert re.search(
        r"pods 36: gated 0 placed 36 running 36 \| IMEX ready 36/36 nodes \| domain Ready "
        r"in 2 cliques, pods running 18/18 \+ 18/18",
        out,
    ), out
    assert "36 pods in 2 slices over 2 cliques" in out

    rows = summary_rows(out)
    assert re.fullmatch(
        r"\d+\.\d s \(kubectl apply -> Ready, all pods running\)", rows["time to Ready"]
    )
    assert re.fullmatch(r"[0-9a-f-]{36}\.\d+", rows["clique"]), rows
    assert rows["channel"].isdigit()
    assert rows["members"] == "18 nodes"
    assert re.match(r"XID 74 on rack-\d-tray\d\d; Degraded \(\w+\)", rows["fault"])
    assert re.fullmatch(
        r"recovered in \d+\.\d s: Ready again, replacement pod on rack-\d-tray\d\d",
        rows["fault to recovered"],
    )
    assert re.fullmatch(
        r"\d+\.\d s \(kubectl apply -> Ready, 36 pods running in 2 slices\)",
        rows["multi-clique Ready"],
    ), rows
    slices = [rows["slice 0"], rows["slice 1"]]
    found = [
        re.fullmatch(rf"clique ([0-9a-f-]{{36}}\.\d+), channel \d+, ranks {ranks}, 18 nodes", row)
        for row, ranks in zip(slices, ("0-17", "18-35"), strict=True)
    ]
    assert all(found), slices
    assert len({match.group(1) for match in found if match}) == 2, slices  # one slice per rack
    assert "slice 2" not in rows
    (faults,) = re.findall(r"node\.fault (\d+)", rows["events seen"])
    assert int(faults) >= 1 + 18  # the XID, and the fabric of every node of a rack
    assert "domain.membership" in rows["events seen"]
    assert re.fullmatch(
        r"3[56]/36 nodes at the lowest, from the XID to Ready again", rows["IMEX ready"]
    ), rows
    assert re.fullmatch(r"rack-\d: 18 nodes, clique [0-9a-f-]{36}\.\d+", rows["fabric lost"])
    failover = re.fullmatch(
        r"moved to clique ([0-9a-f-]{36}\.\d+) \(rack-\d\), channel \d+, after the 5 s grace; "
        r"Ready there \d+\.\d s after the fabric loss \(-?\d+\.\d s past the grace\)",
        rows["failover"],
    )
    assert failover, rows
    assert failover.group(1) != rows["clique"]  # the other rack's clique
    assert rows["fabric lost"].endswith(rows["clique"])  # the seed's own rack lost its fabric
    assert re.fullmatch(
        r"rack-\d back in its clique, IMEX ready, \d+\.\d s after the fabric returned",
        rows["fabric restored"],
    )
    assert rows["IMEX restarts"] == "0 on 36 nodes during the story (the node host's counts)"
    assert re.match(r"[0-9a-f]{32} ", rows["trace id"])

    pids = [int(pid) for pid in re.findall(r"\(pid (\d+)\)", out)]
    processes_line = next(line for line in out.splitlines() if "processes: " in line)
    pids += [int(pid) for pid in re.findall(r" (\d+)(?:,|$)", processes_line)]
    assert len(set(pids)) >= 6, processes_line  # nats, cluster, control plane, 2 services, nodes
    assert wait_for_sync(
        lambda: not [pid for pid in pids if alive(pid)] and not processes_naming(str(state)),
        timeout=30,
        interval=0.2,
        what="every process the demo started gone",
    )
    assert not (state / "cdo.json").exists()
