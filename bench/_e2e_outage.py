"""The end-to-end benchmark's NATS outage: the system's nats-server stopped, the control plane
restarted without it, and what a user sees meanwhile.

- :func:`stop_nats` stops the nats-server ``cdo sim up`` started (SIGTERM) and returns what it
  ran with; :func:`start_nats` starts it again on the same port and store.
- :func:`restart_control_plane` SIGKILLs the domain controller and the clique allocator; the
  control plane starts them again, as the kubelet would, and they come up without NATS.
- :func:`refused_pods` counts the pods the API server refused in a namespace: the workload
  controllers' ``FailedCreate`` Events (with their repeat counts).
- :func:`other_driver_pod` is a pod whose claim template names another driver's DeviceClass:
  none of cdo's business, so it must be admitted whatever state cdo is in.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import EVENTS, PODS, RESOURCE_CLAIM_TEMPLATES
from sim.control.processes import Command, http_ready, poll, respawn, stop
from sim.control.state import Started, read_controlplane, read_record

NATS_MARKER = "nats-server"
SERVICES = ("domain-controller", "clique-allocator")
OTHER_CLASS = "other.example.com"
OTHER_TEMPLATE = "other-driver-rct"


def _nats(state_dir: Path) -> Started:
    record = read_record(state_dir)
    if record is None:
        raise RuntimeError(f"no system recorded in {state_dir}")
    (started,) = [p for p in record.processes if p.marker == NATS_MARKER]
    return started


async def stop_nats(state_dir: Path) -> Command:
    """Stop the system's nats-server; what it ran with."""
    started = _nats(state_dir)
    command = Command.of(started.pid)
    await asyncio.to_thread(stop, started)
    return command


def start_nats(state_dir: Path, command: Command) -> None:
    """Start the nats-server again, on the same port and store."""
    respawn(state_dir, _nats(state_dir), command)


async def restart_control_plane(state_dir: Path, *, timeout_s: float) -> None:
    """SIGKILL both services and wait until the control plane has them running and ready."""
    info = read_controlplane(state_dir)
    if info is None:
        raise RuntimeError("the control plane is not running")
    old = {name: info.services[name].pid for name in SERVICES}
    for pid in old.values():
        os.kill(pid, signal.SIGKILL)

    def back() -> bool | None:
        now = read_controlplane(state_dir)
        if now is None:
            return None
        services = [now.services[name] for name in SERVICES]
        if any(service.pid == old[name] for name, service in zip(SERVICES, services, strict=True)):
            return None
        return True if all(http_ready(service.probe_url) for service in services) else None

    if await asyncio.to_thread(poll, back, timeout_s=timeout_s) is None:
        raise TimeoutError("the control plane did not bring its services back")


class _Event(msgspec.Struct):
    reason: str = ""
    count: int = 0


class _Events(msgspec.Struct):
    items: list[_Event]


async def refused_pods(client: KubeClient, namespace: str) -> int:
    """Pod creations the API server refused in ``namespace``, as their controllers report."""
    raw = await client.list(EVENTS, namespace=namespace)
    events = msgspec.json.decode(raw, type=_Events).items
    return sum(max(event.count, 1) for event in events if event.reason == "FailedCreate")


def other_driver_template(namespace: str) -> dict[str, Any]:
    request = {"name": "dev", "exactly": {"deviceClassName": OTHER_CLASS}}
    return {
        "apiVersion": RESOURCE_CLAIM_TEMPLATES.api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": OTHER_TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def other_driver_pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "main", "image": "registry.example.com/other:1"}],
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": OTHER_TEMPLATE}],
        },
    }


async def admit_other_pod(client: KubeClient, name: str, namespace: str) -> bool:
    """Create (and delete again) a pod of another driver; whether it was admitted."""
    try:
        await client.create(PODS, other_driver_pod(name, namespace), namespace=namespace)
    except KubeApiError:
        return False
    await client.delete(PODS, name, namespace=namespace)
    return True
