"""Property: a watcher that stops and resumes from any resourceVersion it has seen ends
with the same state as a fresh list, with and without a label selector."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.kubeapi import ServerConfig, serve

CMS = "/api/v1/namespaces/default/configmaps"
NAMES = ("a", "b", "c", "d")

op = st.tuples(
    st.sampled_from(("put", "put", "delete")),
    st.sampled_from(NAMES),
    st.sampled_from(("red", "blue")),
    st.integers(0, 3),
)


async def _apply(
    session: aiohttp.ClientSession, base: str, ops: list[tuple[str, str, str, int]]
) -> None:
    for kind, name, color, value in ops:
        if kind == "delete":
            async with session.delete(f"{base}{CMS}/{name}") as resp:
                assert resp.status in (200, 404)
            continue
        body = {"metadata": {"name": name, "labels": {"color": color}}, "data": {"v": str(value)}}
        async with session.post(base + CMS, json=body) as resp:
            if resp.status == 409:
                patch = json.dumps(
                    {"metadata": {"labels": {"color": color}}, "data": {"v": str(value)}}
                )
                async with session.patch(
                    f"{base}{CMS}/{name}",
                    data=patch,
                    headers={"Content-Type": "application/merge-patch+json"},
                ) as presp:
                    assert presp.status == 200
            else:
                assert resp.status == 201


def _fold(state: dict[str, Any], event: dict[str, Any]) -> None:
    obj = event["object"]
    name = obj["metadata"]["name"]
    if event["type"] in ("ADDED", "MODIFIED"):
        state[name] = (
            obj["metadata"]["resourceVersion"],
            obj.get("data"),
            obj["metadata"].get("labels"),
        )
    elif event["type"] == "DELETED":
        state.pop(name, None)


async def _read(
    resp: aiohttp.ClientResponse, count: int | None, until_rv: int | None
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while count is None or len(events) < count:
        line = await resp.content.readline()
        if not line:
            break
        event = json.loads(line)
        if event["type"] == "BOOKMARK":
            if (
                until_rv is not None
                and int(event["object"]["metadata"]["resourceVersion"]) >= until_rv
            ):
                break
            continue
        events.append(event)
    return events


async def _scenario(
    tmp: Path,
    before: list[tuple[str, str, str, int]],
    first: list[tuple[str, str, str, int]],
    second: list[tuple[str, str, str, int]],
    consumed: int,
    resume_pick: int,
    selector: str,
) -> None:
    config = ServerConfig(bookmark_interval_s=0.05)
    async with (
        serve(config=config, kubeconfig=tmp / "kubeconfig") as kube,
        aiohttp.ClientSession() as session,
    ):
        base = kube.url
        await _apply(session, base, before)
        params = {"labelSelector": selector} if selector else {}
        async with session.get(base + CMS, params=params) as resp:
            listed = await resp.json()
        state: dict[str, Any] = {}
        for item in listed["items"]:
            _fold(state, {"type": "ADDED", "object": item})
        seen_rvs = [int(listed["metadata"]["resourceVersion"])]
        await _apply(session, base, first)
        watch_params = {
            **params,
            "watch": "true",
            "resourceVersion": str(seen_rvs[0]),
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "5",
        }
        async with session.get(base + CMS, params=watch_params) as resp:
            events = await _read(resp, consumed, kube.store.rv)
        for event in events:
            _fold(state, event)
            seen_rvs.append(int(event["object"]["metadata"]["resourceVersion"]))
        await _apply(session, base, second)
        resume_rv = seen_rvs[resume_pick % len(seen_rvs)]
        final_rv = kube.store.rv
        resume_params = {
            **params,
            "watch": "true",
            "resourceVersion": str(resume_rv),
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "5",
        }
        async with session.get(base + CMS, params=resume_params) as resp:
            for event in await _read(resp, None, final_rv):
                _fold(state, event)
        async with session.get(base + CMS, params=params) as resp:
            fresh = await resp.json()
        expected: dict[str, Any] = {}
        for item in fresh["items"]:
            _fold(expected, {"type": "ADDED", "object": item})
        assert state == expected


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.lists(op, max_size=6),
    first=st.lists(op, max_size=10),
    second=st.lists(op, max_size=10),
    consumed=st.integers(0, 10),
    resume_pick=st.integers(0, 100),
    selector=st.sampled_from(("", "color=red", "color!=blue")),
)
def test_resumed_watch_converges_to_fresh_list(
    tmp_path: Path,
    before: list[tuple[str, str, str, int]],
    first: list[tuple[str, str, str, int]],
    second: list[tuple[str, str, str, int]],
    consumed: int,
    resume_pick: int,
    selector: str,
) -> None:
    asyncio.run(_scenario(tmp_path, before, first, second, consumed, resume_pick, selector))
