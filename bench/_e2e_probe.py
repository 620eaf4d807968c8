"""What the end-to-end benchmark reads from the API while it waits: one list per kind per look.

Everything here is a read of current state (level, not events), so a look taken at any moment
says whether a scenario is done, gone, or recovered from a fault.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from bench._e2e_workloads import Scenario
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain
from shared.kube.client import KubeClient
from shared.kube.models import Pod
from shared.kube.resources import PODS

T = TypeVar("T")

POLL_INTERVAL_S = 0.05
"""~20 looks a second: fine enough for figures of a few seconds, light on a 2-core machine."""


class _Domains(msgspec.Struct):
    items: list[ComputeDomain]


class _Pods(msgspec.Struct):
    items: list[Pod]


class _Metadata(msgspec.Struct):
    name: str


class _Named(msgspec.Struct):
    metadata: _Metadata


class _NamedList(msgspec.Struct):
    items: list[_Named]


@dataclass(frozen=True)
class Look:
    """One look at a scenario's namespace."""

    domains: dict[str, ComputeDomain]
    pods: list[Pod]
    """Pods not being deleted."""
    terminating: int

    def ready_domains(self, names: tuple[str, ...]) -> int:
        return sum(
            1
            for name in names
            if (d := self.domains.get(name)) is not None and d.status.status == "Ready"
        )

    def running(self) -> list[Pod]:
        return [pod for pod in self.pods if pod.status.phase == "Running"]

    def summary(self, scenario: Scenario) -> str:
        return (
            f"{self.ready_domains(scenario.domains)}/{len(scenario.domains)} domains Ready, "
            f"{len(self.running())}/{scenario.pods} pods Running "
            f"({len(self.pods)} pods, {self.terminating} terminating)"
        )


async def look(client: KubeClient, namespace: str) -> Look:
    domains, pods = await asyncio.gather(
        client.list(COMPUTE_DOMAINS, namespace=namespace), client.list(PODS, namespace=namespace)
    )
    decoded = msgspec.json.decode(pods, type=_Pods).items
    live = [pod for pod in decoded if pod.metadata.deletion_timestamp is None]
    return Look(
        domains={d.metadata.name: d for d in msgspec.json.decode(domains, type=_Domains).items},
        pods=live,
        terminating=len(decoded) - len(live),
    )


def done(scenario: Scenario, seen: Look) -> bool:
    """Every domain Ready and exactly the scenario's pods Running."""
    return (
        seen.ready_domains(scenario.domains) == len(scenario.domains)
        and len(seen.pods) == scenario.pods
        and len(seen.running()) == scenario.pods
    )


async def placements_in(client: KubeClient, namespace: str) -> list[str]:
    raw = await client.list(PLACEMENTS, namespace=namespace)
    return [item.metadata.name for item in msgspec.json.decode(raw, type=_NamedList).items]


async def poll(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout_s: float,
    what: Callable[[], str],
    interval_s: float = POLL_INTERVAL_S,
) -> tuple[T, float]:
    """Look until ``probe`` answers; the answer and the seconds it took. TimeoutError names
    ``what()``, the last state seen, so a stuck run says where it stuck."""
    started = time.perf_counter()
    while True:
        answer = await probe()
        elapsed = time.perf_counter() - started
        if answer:
            return answer, elapsed
        if elapsed >= timeout_s:
            raise TimeoutError(f"not done after {timeout_s:.0f} s: {what()}")
        await asyncio.sleep(interval_s)
