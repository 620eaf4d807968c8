"""WATCH over chunked HTTP: start points, replay, 410, bookmarks, timeouts, selectors."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException

from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .conftest import Http

CMS = "/api/v1/namespaces/default/configmaps"


async def _create(http: Http, name: str, **labels: str) -> dict[str, Any]:
    status, body, _ = await http.post(CMS, {"metadata": {"name": name, "labels": labels}})
    assert status == 201, body
    return body  # type: ignore[no-any-return]


def _names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


@pytest.mark.parametrize("flag", ["true", "True", "1"])
async def test_watch_flag_spellings(http: Http, flag: str) -> None:
    await _create(http, "a")
    events = await http.watch_lines(CMS, params={"watch": flag, "timeoutSeconds": "1"}, count=1)
    assert _names(events) == [("ADDED", "a")]


async def test_watch_from_unset_sends_synthetic_added_then_live(http: Http) -> None:
    await _create(http, "a")
    await _create(http, "b")
    async with http.watch_stream(CMS, params={"watch": "true"}) as stream:
        synthetic = [await stream.next(), await stream.next()]
        # The synthetic ADDEDs have arrived, so the watch is established: "c" is created only
        # now and can reach this stream only as a live event.
        created = await _create(http, "c")
        live = await stream.next()
    events = [*synthetic, live]
    assert _names(events) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
    assert live["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_watch_from_rv_replays_newer_events(http: Http) -> None:
    a = await _create(http, "a")
    start = a["metadata"]["resourceVersion"]
    await http.patch(f"{CMS}/a", {"data": {"x": "1"}}, "application/merge-patch+json")
    await _create(http, "b")
    await http.delete(f"{CMS}/a")
    events = await http.watch_lines(CMS, params={"watch": "1", "resourceVersion": start}, count=3)
    assert _names(events) == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


async def test_watch_older_than_window_gets_410_then_close(http: Http, kube: KubeServer) -> None:
    a = await _create(http, "a")
    await _create(http, "b")
    kube.compact()
    events = await http.watch_lines(
        CMS, params={"watch": "true", "resourceVersion": a["metadata"]["resourceVersion"]}, count=5
    )
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": (
            f"too old resource version: {a['metadata']['resourceVersion']} ({kube.store.rv})"
        ),
        "reason": "Expired",
        "code": 410,
    }


async def test_bounded_window_expires_old_rvs(tmp_path: Any) -> None:
    from sim.kubeapi import ServerConfig, serve

    async with (
        serve(config=ServerConfig(watch_window=5), kubeconfig=tmp_path / "kc") as kube,
        aiohttp.ClientSession() as s,
    ):
        http = Http(s, kube.url)
        first = await _create(http, "w0")
        for i in range(1, 12):
            await _create(http, f"w{i}")
        events = await http.watch_lines(
            CMS,
            params={"watch": "true", "resourceVersion": first["metadata"]["resourceVersion"]},
            count=2,
        )
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
        recent = str(kube.store.rv - 2)
        events = await http.watch_lines(
            CMS, params={"watch": "true", "resourceVersion": recent, "timeoutSeconds": "1"}, count=2
        )
        assert [e["type"] for e in events] == ["ADDED", "ADDED"]


async def test_bookmarks_carry_progress(http: Http, kube: KubeServer) -> None:
    await _create(http, "a")
    rv = str(kube.store.rv)
    await http.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
    events = await http.watch_lines(
        CMS, params={"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}, count=1
    )
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(kube.store.rv)},
    }


async def test_timeout_seconds_ends_stream(http: Http) -> None:
    started = time.monotonic()
    events = await http.watch_lines(CMS, params={"watch": "true", "timeoutSeconds": "1"}, count=10)
    elapsed = time.monotonic() - started
    assert events == []
    assert 0.9 <= elapsed < 5


async def test_selector_transitions(http: Http) -> None:
    await _create(http, "a", tier="x")
    start = await _create(http, "b", tier="y")
    rv = start["metadata"]["resourceVersion"]

    async def changes() -> None:
        await http.patch(
            f"{CMS}/b", {"metadata": {"labels": {"tier": "x"}}}, "application/merge-patch+json"
        )
        await http.patch(
            f"{CMS}/a", {"metadata": {"labels": {"tier": "z"}}}, "application/merge-patch+json"
        )
        await http.patch(f"{CMS}/b", {"data": {"k": "v"}}, "application/merge-patch+json")

    await changes()
    events = await http.watch_lines(
        CMS, params={"watch": "true", "resourceVersion": rv, "labelSelector": "tier=x"}, count=3
    )
    assert _names(events) == [("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
    # The DELETED event carries the last matching content with the event's resourceVersion.
    assert events[1]["object"]["metadata"]["labels"] == {"tier": "x"}
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )


async def test_field_selector_watch(http: Http) -> None:
    await _create(http, "a")
    await _create(http, "b")
    events = await http.watch_lines(
        CMS,
        params={"watch": "true", "fieldSelector": "metadata.name=b", "timeoutSeconds": "1"},
        count=5,
    )
    assert _names(events) == [("ADDED", "b")]


async def test_send_initial_events_ends_with_marked_bookmark(http: Http, kube: KubeServer) -> None:
    await _create(http, "a")
    await _create(http, "b")
    events = await http.watch_lines(
        CMS,
        params={
            "watch": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
        },
        count=3,
    )
    assert _names(events)[:2] == [("ADDED", "a"), ("ADDED", "b")]
    assert events[2]["type"] == "BOOKMARK"
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert events[2]["object"]["metadata"]["resourceVersion"] == str(kube.store.rv)


async def test_send_initial_events_requires_not_older_than(http: Http) -> None:
    status, body, _ = await http.get(CMS, params={"watch": "true", "sendInitialEvents": "true"})
    assert status == 422
    assert (
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" in body["message"]
    )


async def test_namespace_scoped_watch_ignores_other_namespaces(http: Http) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "other"}})
    await http.post("/api/v1/namespaces/other/configmaps", {"metadata": {"name": "o"}})
    await _create(http, "d")
    events = await http.watch_lines(CMS, params={"watch": "true", "timeoutSeconds": "1"}, count=5)
    assert _names(events) == [("ADDED", "d")]
    every = await http.watch_lines(
        "/api/v1/configmaps",
        params={
            "watch": "true",
            "timeoutSeconds": "1",
            "fieldSelector": "metadata.name!=kube-root-ca.crt",
        },
        count=5,
    )
    assert sorted(_names(every)) == [("ADDED", "d"), ("ADDED", "o")]


async def test_asyncio_client_watch_resumes_from_last_rv(
    api_client: client.ApiClient, kube: KubeServer
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
    )
    listed = await core.list_namespaced_config_map("default")
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
    )

    async def consume() -> None:
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                w.stop()
                break

    task = asyncio.create_task(consume())
    await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="b"))
    )
    await wait_for(lambda: len(seen) >= 1, what="first event")
    kube.faults.drop_watches()  # the client reconnects from the last resourceVersion it saw
    await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c"))
    )
    await core.delete_namespaced_config_map("b", "default")
    await asyncio.wait_for(task, 10)
    await w.close()
    assert seen == [("ADDED", "b"), ("ADDED", "c"), ("DELETED", "b")]


async def test_asyncio_client_sees_410(api_client: client.ApiClient, kube: KubeServer) -> None:
    core = client.CoreV1Api(api_client)
    created = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
    )
    await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="b"))
    )
    kube.compact()
    w = watch.Watch()
    with pytest.raises(ApiException) as exc:
        async for _ in w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=created.metadata.resource_version,
            timeout_seconds=2,
        ):
            pass
    await w.close()
    assert exc.value.status == 410
    assert "Expired" in str(exc.value.reason)


async def test_raw_lines_are_newline_delimited_json(kube: KubeServer, http: Http) -> None:
    await _create(http, "a")
    async with (
        aiohttp.ClientSession() as s,
        s.get(kube.url + CMS, params={"watch": "true", "timeoutSeconds": "1"}) as resp,
    ):
        assert resp.headers["Content-Type"] == "application/json"
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        raw = await resp.read()
    lines = raw.split(b"\n")
    assert lines[-1] == b""
    assert json.loads(lines[0])["type"] == "ADDED"


async def test_legacy_watch_path(http: Http) -> None:
    await _create(http, "a")
    events = await http.watch_lines(
        "/api/v1/watch/namespaces/default/configmaps", params={"timeoutSeconds": "1"}, count=1
    )
    assert _names(events) == [("ADDED", "a")]


async def test_table_watch(http: Http) -> None:
    await _create(http, "a")
    async with http.session.get(
        http.base + CMS,
        params={"watch": "true", "timeoutSeconds": "1"},
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    ) as resp:
        event = json.loads(await resp.content.readline())
    assert event["type"] == "ADDED"
    assert event["object"]["kind"] == "Table"
    assert event["object"]["rows"][0]["cells"][0] == "a"
