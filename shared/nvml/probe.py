"""Print what the NVML interface reads on this machine: ``python -m shared.nvml.probe``.

Meant to be run once on a real GPU node to compare the interface with the hardware:
driver, identity, fabric info (v3 or v2), the node's clique, platform placement, NVLink
states, ECC, row remapping and the recovery action of every GPU, then events for a few
seconds (``--events-s``). Exits 2 when NVML is unavailable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from shared.nvml.backend import PynvmlNvml
from shared.nvml.clique import node_clique
from shared.nvml.errors import NvmlError, NvmlUnavailableError
from shared.nvml.events import subscribed, watch_events
from shared.nvml.fabric import describe_value, health_faults
from shared.nvml.model import FabricHealthSummary, FabricInfo, FabricState, PlatformInfo
from shared.nvml.placement import node_placement

T = TypeVar("T")


def _read(label: str, read: Callable[[], T]) -> T | None:
    try:
        value = read()
    except NvmlError as error:
        print(f"    {label}: {type(error).__name__}: {error}")
        return None
    print(f"    {label}: {value}")
    return value


def _fabric_line(info: FabricInfo) -> str:
    state = FabricState(info.state).name if info.state in set(FabricState) else info.state
    summary = (
        "n/a (v2)"
        if info.health_summary is None
        else FabricHealthSummary(info.health_summary).name
        if info.health_summary in set(FabricHealthSummary)
        else str(info.health_summary)
    )
    faults = ", ".join(
        f"{fault.field.name}={describe_value(fault.field, fault.value)}"
        for fault in health_faults(info.health_mask)
    )
    return (
        f"v{info.version} state={state} status={info.status} "
        f"cluster={info.cluster_uuid} clique_id={info.clique_id} "
        f"mask=0x{info.health_mask:08x} summary={summary} faults=[{faults or 'none'}]"
    )


def probe(nvml: PynvmlNvml) -> None:
    print(f"driver {nvml.driver_version()}")
    count = nvml.device_count()
    print(f"{count} GPUs")
    fabric: list[FabricInfo] = []
    platforms: list[PlatformInfo | None] = []
    for gpu in range(count):
        print(f"  GPU {gpu}")
        _read("identity", partial(nvml.identity, gpu))
        info = _read("fabric", partial(nvml.fabric_info, gpu))
        if info is not None:
            print(f"      {_fabric_line(info)}")
            fabric.append(info)
        platforms.append(_read("platform", partial(nvml.platform_info, gpu)))
        links = _read("nvlink", partial(nvml.nvlink_states, gpu))
        if links is not None:
            print(f"      {len(links.active)} links, down: {list(links.down)}")
        _read("ecc", partial(nvml.ecc_errors, gpu))
        _read("remapped rows", partial(nvml.remapped_rows, gpu))
        _read("recovery action", partial(nvml.recovery_action, gpu))
    print(f"node clique: {node_clique(fabric)}")
    print(f"node placement: {node_placement(platforms)}")


async def _events(nvml: PynvmlNvml, seconds: float) -> None:
    async with subscribed(nvml) as subscription:
        print(f"events: registered GPUs {list(subscription.gpus)}, for {seconds}s")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                async with contextlib.aclosing(watch_events(subscription)) as stream:
                    async for event in stream:
                        print(f"  event {event}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.nvml.probe", description=__doc__)
    parser.add_argument("--events-s", type=float, default=3.0, help="seconds to print events")
    args = parser.parse_args(argv)
    nvml = PynvmlNvml()
    try:
        nvml.init()
    except NvmlUnavailableError as error:
        print(f"NVML unavailable: {error}", file=sys.stderr)
        return 2
    try:
        probe(nvml)
        if args.events_s > 0:
            asyncio.run(_events(nvml, args.events_s))
    finally:
        nvml.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
