"""``cdo sim power``, ``cdo sim fault`` and ``cdo sim clock``: act on one simulated node.

``power`` goes through the cluster's control API and then waits (bounded) until the node host
has stopped or restarted the node's services; ``fault`` goes through the node host's control
API into the node's simulated NVML; ``clock`` sets how far the node's wall clock (what its
services read as the time) runs ahead of true time, or behind. All find the APIs through the
state directory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from shared.command_errors import CommandError, UsageError
from sim.control.http import request
from sim.control.processes import poll
from sim.control.state import read_nodehost, require_cluster, require_nodehost

POWER_SETTLE_S = 30.0


def power(state_dir: Path, node: str, state: str, *, say: Callable[[str], None]) -> None:
    cluster = require_cluster(state_dir)
    answer = request(cluster.control_url, "POST", f"/nodes/{node}/power/{state}")
    switched = f"{answer['name']}: {'on' if answer['powered'] else 'off'}"
    host = read_nodehost(state_dir)
    if host is None:
        say(switched)
        return
    wanted = "off" if state == "off" else "running"

    def probe() -> str | None:
        entry = request(host.control_url, "GET", f"/nodes/{node}")
        return str(entry["state"]) if entry["state"] == wanted else None

    try:
        reached = poll(probe, timeout_s=POWER_SETTLE_S)
    except CommandError:
        reached = None  # the node is not hosted there
    services = {"off": "services stopped", "running": "services running"}.get(reached or "", "")
    say(switched + (f" ({services})" if services else ""))


def fault_body(
    *,
    xid: int | None,
    gpu: int | None,
    gpu_lost: bool,
    gpu_back: bool,
    nvlink_down: int | None,
    nvlink_up: int | None,
    fabric_state: str | None,
    fabric_problems: Sequence[str],
    clear: bool,
    host_imex_service: str | None = None,
    cdi: str | None = None,
    imex_programs: str | None = None,
) -> dict[str, Any] | None:
    """The control API's fault body for the options given (None: clear every fault)."""
    chosen = [
        name
        for name, given in (
            ("--xid", xid is not None),
            ("--gpu-lost", gpu_lost),
            ("--gpu-back", gpu_back),
            ("--nvlink-down", nvlink_down is not None),
            ("--nvlink-up", nvlink_up is not None),
            ("--fabric-state/--fabric-problem", fabric_state is not None or bool(fabric_problems)),
            ("--clear", clear),
            ("--host-imex-service", host_imex_service is not None),
            ("--cdi", cdi is not None),
            ("--imex-programs", imex_programs is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise UsageError(
            "give exactly one fault: --xid N, --gpu-lost, --gpu-back, --nvlink-down LINK, "
            "--nvlink-up LINK, --fabric-state STATE / --fabric-problem PROBLEM, --clear, "
            "--host-imex-service on|off, --cdi on|off or --imex-programs installed|missing"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    index = 0 if gpu is None else gpu
    if clear:
        return None
    if host_imex_service is not None:
        return {"kind": "host_imex", "running": host_imex_service == "on"}
    if cdi is not None:
        return {"kind": "cdi", "enabled": cdi == "on"}
    if imex_programs is not None:
        return {"kind": "imex_programs", "installed": imex_programs == "installed"}
    if xid is not None:
        return {"kind": "xid", "gpu": index, "xid": xid}
    if gpu_lost or gpu_back:
        return {"kind": "gpu_lost", "gpu": index, "lost": gpu_lost}
    if nvlink_down is not None or nvlink_up is not None:
        link = nvlink_down if nvlink_down is not None else nvlink_up
        return {"kind": "nvlink", "gpu": index, "link": link, "up": nvlink_up is not None}
    return {"kind": "fabric", "gpu": gpu, "state": fabric_state, "problems": list(fabric_problems)}


def fault(
    state_dir: Path, node: str, body: dict[str, Any] | None, *, say: Callable[[str], None]
) -> None:
    host = require_nodehost(state_dir)
    if body is None:
        answer = request(host.control_url, "DELETE", f"/nodes/{node}/faults")
    else:
        answer = request(host.control_url, "POST", f"/nodes/{node}/faults", body)
    say(f"{answer['node']}: {answer['applied']}")


def clock(state_dir: Path, node: str, offset_s: float, *, say: Callable[[str], None]) -> None:
    host = require_nodehost(state_dir)
    answer = request(host.control_url, "PUT", f"/nodes/{node}/clock", {"offset_s": offset_s})
    offset = float(answer["clock_offset_s"])
    where = "on time" if offset == 0 else f"{abs(offset):g} s {'ahead' if offset > 0 else 'behind'}"
    say(f"{answer['name']}: clock {where}")
