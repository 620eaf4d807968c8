"""Fault injection: forced 410s, dropped watches, failing requests, latency."""

from __future__ import annotations

import time

from sim.kubeapi import KubeServer

from .conftest import Http

CMS = "/api/v1/namespaces/default/configmaps"


async def test_expire_next_watch(http: Http, kube: KubeServer) -> None:
    kube.faults.expire_next_watch()
    events = await http.watch_lines(
        CMS, params={"watch": "true", "resourceVersion": str(kube.store.rv)}, count=3
    )
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    # Only the next one.
    events = await http.watch_lines(CMS, params={"watch": "true", "timeoutSeconds": "1"}, count=1)
    assert all(e["type"] != "ERROR" for e in events)


async def test_drop_watches_ends_open_streams(http: Http, kube: KubeServer) -> None:
    params = {"watch": "true", "resourceVersion": str(kube.store.rv)}
    async with http.watch_stream(CMS, params=params, deadline_s=5) as stream:
        # A first event proves the server follows this watch, so the drop below reaches it.
        await http.post(CMS, {"metadata": {"name": "seen"}})
        assert (await stream.next())["type"] == "ADDED"
        kube.faults.drop_watches()
        body = await stream.rest()
    assert body == b""


async def test_fail_next_with_codes(http: Http, kube: KubeServer) -> None:
    kube.faults.fail_next(2, code=429, retry_after=3, verbs=["create"])
    for _ in range(2):
        status, body, headers = await http.post(CMS, {"metadata": {"name": "x"}})
        assert status == 429
        assert body["reason"] == "TooManyRequests" and body["details"] == {"retryAfterSeconds": 3}
        assert headers["Retry-After"] == "3"
    status, _, _ = await http.post(CMS, {"metadata": {"name": "x"}})
    assert status == 201
    kube.faults.fail_next(code=409, resource="configmaps")
    status, body, _ = await http.put(f"{CMS}/x", {"metadata": {"name": "x"}})
    assert status == 409 and body["message"].startswith(
        'Operation cannot be fulfilled on configmaps "x"'
    )
    kube.faults.fail_next(code=500)
    status, body, _ = await http.get(f"{CMS}/x")
    assert status == 500 and body["reason"] == "InternalError"
    status, _, _ = await http.get(f"{CMS}/x")
    assert status == 200


async def test_latency(http: Http, kube: KubeServer) -> None:
    kube.faults.set_latency(0.3, verbs=["list"])
    started = time.monotonic()
    await http.get(CMS)
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    await http.post(CMS, {"metadata": {"name": "fast"}})
    assert time.monotonic() - started < 0.3
    kube.faults.clear()
    started = time.monotonic()
    await http.get(CMS)
    assert time.monotonic() - started < 0.3
