"""Built-in admission plugins: DefaultTolerationSeconds on pod creation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sim.kubeapi import ServerConfig, serve
from sim.kubeapi.hosting.child_process import serve_in_process_of_its_own

from .conftest import Http

PODS = "/api/v1/namespaces/default/pods"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _pod(name: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "img:1"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name}, "spec": spec}


def _default(key: str, seconds: int = 300) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


async def _tolerations(http: Http, body: dict[str, Any], **params: str) -> Any:
    status, created, _ = await http.post(PODS, body, params=params or None)
    assert status == 201, created
    return created["spec"].get("tolerations")


async def test_pods_get_the_lifecycle_tolerations_they_lack(http: Http) -> None:
    assert await _tolerations(http, _pod("bare")) == [_default(NOT_READY), _default(UNREACHABLE)]
    own = {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    assert await _tolerations(http, _pod("own", [own])) == [own, _default(UNREACHABLE)]
    # Only key and effect count, an empty one matching all (as in the real plugin).
    everything = {"operator": "Exists"}
    assert await _tolerations(http, _pod("all", [everything])) == [everything]
    any_effect = {"key": UNREACHABLE, "operator": "Exists"}
    assert await _tolerations(http, _pod("any", [any_effect])) == [
        any_effect,
        _default(NOT_READY),
    ]
    no_schedule = {"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}
    assert await _tolerations(http, _pod("soft", [no_schedule])) == [
        no_schedule,
        _default(NOT_READY),
        _default(UNREACHABLE),
    ]
    dry = await _tolerations(http, _pod("dry"), dryRun="All")
    assert dry == [_default(NOT_READY), _default(UNREACHABLE)]


async def test_updates_keep_them(http: Http) -> None:
    await _tolerations(http, _pod("p"))
    status, before, _ = await http.get(f"{PODS}/p")
    # Updates run the plugin too: dropping the defaults puts them back, so nothing changes.
    status, body, _ = await http.patch(
        f"{PODS}/p", {"spec": {"tolerations": []}}, "application/merge-patch+json"
    )
    assert status == 200, body
    assert body["spec"]["tolerations"] == [_default(NOT_READY), _default(UNREACHABLE)]
    assert body["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # Status writes are left alone.
    status, body, _ = await http.patch(
        f"{PODS}/p/status", {"status": {"phase": "Running"}}, "application/merge-patch+json"
    )
    assert status == 200 and len(body["spec"]["tolerations"]) == 2


async def test_the_plugin_is_configurable(tmp_path: Path) -> None:
    for seconds, expected in (
        (None, None),
        (7, [_default(NOT_READY, 7), _default(UNREACHABLE, 7)]),
    ):
        config = ServerConfig(default_toleration_seconds=seconds)
        async with (
            serve(config=config, kubeconfig=tmp_path / "kubeconfig") as kube,
            aiohttp.ClientSession() as session,
        ):
            assert await _tolerations(Http(session, kube.url), _pod("p")) == expected


async def test_an_emulator_in_a_process_of_its_own_gets_the_whole_config(tmp_path: Path) -> None:
    # What ``python -m sim up`` runs: the settings travel to the child as JSON.
    config = ServerConfig(default_toleration_seconds=7)
    async with (
        serve_in_process_of_its_own(
            config=config, host="127.0.0.1", port=0, kubeconfig=tmp_path / "kubeconfig"
        ) as kube,
        aiohttp.ClientSession() as session,
    ):
        assert (tmp_path / "kubeconfig").exists()
        tolerations = await _tolerations(Http(session, kube.url), _pod("p"))
        assert tolerations == [_default(NOT_READY, 7), _default(UNREACHABLE, 7)]
        pid = kube.pid
    with pytest.raises(ProcessLookupError):  # stopped (and reaped) on leaving the block
        os.kill(pid, 0)
