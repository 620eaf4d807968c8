"""A small in-memory DRA driver and helpers to run both sides of the kubelet contracts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from shared.kubeletapi import (
    Claim,
    KubeletPlugin,
    PluginPaths,
    PluginWatcher,
    PreparedDevice,
    PrepareResult,
    UnprepareResult,
)

DRIVER = "channels.cdo.test"


def claim(name: str, *, namespace: str = "team-a") -> Claim:
    return Claim(namespace=namespace, uid=f"uid-{name}", name=name)


class ChannelDriver:
    """Hands each claim one channel device, like the IMEX agent does, and remembers it.

    ``refused`` claim names fail on their own; ``outage`` makes every call raise; ``ignored``
    claim names get no result at all; ``stalled`` makes prepare hang.
    """

    def __init__(self) -> None:
        self.prepared: dict[str, PrepareResult] = {}
        self.refused: set[str] = set()
        self.ignored: set[str] = set()
        self.outage: str | None = None
        self.stalled = False

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]:
        if self.outage is not None:
            raise RuntimeError(self.outage)
        if self.stalled:
            await asyncio.Event().wait()
        results: dict[str, PrepareResult] = {}
        for item in claims:
            if item.name in self.ignored:
                continue
            if item.name in self.refused:
                results[item.uid] = PrepareResult(error=f"claim {item.name} refused")
                continue
            channel = self.prepared.get(item.uid) or PrepareResult(
                devices=(
                    PreparedDevice(
                        pool_name="node-0",
                        device_name=f"channel-{len(self.prepared)}",
                        cdi_device_ids=(f"cdo.test/channel={item.namespace}.{item.name}",),
                        request_names=("imex",),
                    ),
                )
            )
            self.prepared[item.uid] = channel
            results[item.uid] = channel
        return results

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]:
        if self.outage is not None:
            raise RuntimeError(self.outage)
        for item in claims:
            self.prepared.pop(item.uid, None)
        return {item.uid: UnprepareResult() for item in claims}


def plugin_for(node_root: Path, driver: ChannelDriver, **options: Any) -> KubeletPlugin:
    return KubeletPlugin(
        driver_name=DRIVER,
        handler=driver,
        paths=PluginPaths.for_driver(DRIVER, kubelet_root=node_root),
        **options,
    )


@contextlib.asynccontextmanager
async def running_watcher(node_root: Path, **options: Any) -> AsyncIterator[PluginWatcher]:
    """A watcher scanning ``node_root``/plugins_registry in a task this context owns."""
    settings: dict[str, Any] = {"scan_interval": 0.02, "retry_interval": 0.05}
    settings.update(options)
    watcher = PluginWatcher(registry_dir=node_root / "plugins_registry", **settings)
    task = asyncio.create_task(watcher.run())
    try:
        yield watcher
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
