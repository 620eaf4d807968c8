"""Selective LISTs and WATCHes over HTTP, read through the selector index, answer what a client
filtering the whole list answers: after label changes, deletes and pods recreated on another
node; page by page; at an older resourceVersion; and for watches from a resourceVersion or
from the current state."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .conftest import Http

NAMESPACES = ("default", "kube-public")
NODES = ("n0", "n1", "n2", "n3")
CLIQUES = ("c0", "c1", "c2")
Labels = dict[str, str]
SELECTORS: tuple[tuple[dict[str, str], Callable[[Labels, str, str], bool]], ...] = (
    # (the query, the same selection evaluated on (labels, node, name) by the client)
    ({"fieldSelector": "spec.nodeName=n1"}, lambda labels, node, name: node == "n1"),
    (
        {"fieldSelector": "spec.nodeName=n2,metadata.name=p05"},
        lambda labels, node, name: node == "n2" and name == "p05",
    ),
    ({"labelSelector": "clique=c1"}, lambda labels, node, name: labels.get("clique") == "c1"),
    (
        {"labelSelector": "clique in (c0,c2),app"},
        lambda labels, node, name: labels.get("clique") in ("c0", "c2") and "app" in labels,
    ),
    (
        {"labelSelector": "clique=c2", "fieldSelector": "spec.nodeName=n3"},
        lambda labels, node, name: labels.get("clique") == "c2" and node == "n3",
    ),
    (
        {"labelSelector": "clique!=c1", "fieldSelector": "spec.nodeName!=n0"},
        lambda labels, node, name: labels.get("clique") != "c1" and node != "n0",
    ),
)


def _pods(namespace: str | None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


def _pod(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {"clique": rng.choice(CLIQUES)}
    if rng.random() < 0.5:
        labels["app"] = "trainer"
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": rng.choice(NODES), "containers": [{"name": "c", "image": "i"}]},
    }


def _selected(pod: dict[str, Any], selects: Callable[[Labels, str, str], bool]) -> bool:
    meta = pod["metadata"]
    return selects(meta.get("labels") or {}, pod["spec"]["nodeName"], meta["name"])


def _keys(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]


async def _list(http: Http, path: str, params: dict[str, str]) -> tuple[list[Any], str, str]:
    """(items, resourceVersion, continue token)."""
    status, body, _ = await http.get(path, params=params)
    assert status == 200, body
    return body["items"], body["metadata"]["resourceVersion"], body["metadata"].get("continue", "")


async def _paged(http: Http, path: str, params: dict[str, str]) -> list[Any]:
    items: list[Any] = []
    token = ""
    while True:
        page, _, token = await _list(
            http, path, {**params, "limit": "2", **({"continue": token} if token else {})}
        )
        items += page
        if not token:
            return items


async def _churn(http: Http, rng: random.Random, steps: int) -> None:
    """Label changes, deletes, and pods recreated (a pod's node cannot change in place)."""
    for _ in range(steps):
        namespace, name = rng.choice(NAMESPACES), f"p{rng.randrange(12):02d}"
        path = f"{_pods(namespace)}/{name}"
        action = rng.random()
        if action < 0.5:
            patch = {"metadata": {"labels": {"clique": rng.choice(CLIQUES), "app": None}}}
            status, _, _ = await http.patch(path, patch, "application/merge-patch+json")
            assert status in (200, 404)
        elif action < 0.75:
            status, _, _ = await http.delete(path)
            assert status in (200, 404)
        else:
            await http.delete(path)
            status, body, _ = await http.post(_pods(namespace), _pod(rng, name))
            assert status == 201, body


async def _watched(
    http: Http, params: dict[str, str], until_rv: int, held: set[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The keys a watcher holds, starting from ``held``, once a bookmark tells it it has seen
    ``until_rv``."""
    state = set(held)
    query = {**params, "watch": "true", "allowWatchBookmarks": "true"}
    async with http.watch_stream("/api/v1/pods", params=query) as events:
        while True:
            event = await events.next()
            obj = event["object"]
            if event["type"] == "BOOKMARK":
                if int(obj["metadata"]["resourceVersion"]) >= until_rv:
                    return state
                continue
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            if event["type"] == "DELETED":
                state.discard(key)
            else:
                state.add(key)


async def test_selective_reads_equal_client_side_filtering(http: Http) -> None:
    rng = random.Random(31)
    for namespace in NAMESPACES:
        for i in range(12):
            status, body, _ = await http.post(_pods(namespace), _pod(rng, f"p{i:02d}"))
            assert status == 201, body
    at_start, start_rv, _ = await _list(http, "/api/v1/pods", {})
    await _churn(http, rng, 25)
    in_middle, middle_rv, _ = await _list(http, "/api/v1/pods", {})
    await _churn(http, rng, 25)
    everything, now_rv, _ = await _list(http, "/api/v1/pods", {})

    for query, selects in SELECTORS:
        for scope in (None, "default"):
            path = _pods(scope)
            expected = [
                p
                for p in everything
                if _selected(p, selects) and scope in (None, p["metadata"]["namespace"])
            ]
            items, _, _ = await _list(http, path, query)
            assert items == expected, (query, scope)
            assert _keys(await _paged(http, path, query)) == _keys(expected), (query, scope)
        # At an older resourceVersion: that version's objects.
        exact = {**query, "resourceVersion": middle_rv, "resourceVersionMatch": "Exact"}
        then, rv, _ = await _list(http, "/api/v1/pods", exact)
        assert rv == middle_rv
        assert _keys(then) == _keys([p for p in in_middle if _selected(p, selects)]), query
        # A watch from the current state, and one from before the churn (after a selective
        # LIST at that version), end where the selective LIST is now.
        wanted = set(_keys([p for p in everything if _selected(p, selects)]))
        fresh = await _watched(http, {**query, "resourceVersion": "0"}, int(now_rv), set())
        assert fresh == wanted, query
        held = set(_keys([p for p in at_start if _selected(p, selects)]))
        resumed = await _watched(http, {**query, "resourceVersion": start_rv}, int(now_rv), held)
        assert resumed == wanted, query
