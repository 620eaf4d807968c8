"""The informer against the API emulator: list, watch, resume, 410, failures, pagination."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.resources import CONFIG_MAPS
from shared.metrics import Metrics
from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

FAST = InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.2, page_size=7)


class ConfigMap(KubeObject, frozen=True, kw_only=True):
    data: dict[str, str] = msgspec.field(default_factory=dict)


Change = tuple[str, str, str]  # (kind, name, value)


def recorder(changes: list[Change]) -> Callable[[ConfigMap | None, ConfigMap | None], None]:
    def handle(old: ConfigMap | None, new: ConfigMap | None) -> None:
        if new is None:
            assert old is not None
            changes.append(("deleted", old.metadata.name, old.data.get("v", "")))
        elif old is None:
            changes.append(("added", new.metadata.name, new.data.get("v", "")))
        else:
            changes.append(("updated", new.metadata.name, new.data.get("v", "")))

    return handle


def config_map(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


async def put(client: KubeClient, name: str, value: str) -> None:
    await client.patch(CONFIG_MAPS, name, {"data": {"v": value}}, namespace="default")


@pytest.fixture
async def running(
    kube_client: KubeClient,
) -> AsyncIterator[tuple[Informer[ConfigMap], list[Change], Metrics]]:
    metrics = Metrics()
    for index in range(20):
        await kube_client.create(CONFIG_MAPS, config_map(f"cm{index}", "0"), namespace="default")
    informer = Informer(
        kube_client, CONFIG_MAPS, ConfigMap, namespace="default", settings=FAST, metrics=metrics
    )
    changes: list[Change] = []
    informer.add_handler(recorder(changes))
    informer.add_index("value", lambda cm: [cm.data.get("v", "")])
    task = asyncio.create_task(informer.run())
    await wait_for(lambda: informer.synced, what="first list")
    yield informer, changes, metrics
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def lists(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "cdo_informer_lists_total", {"resource": "configmaps", "reason": reason}
    )
    return value or 0.0


async def test_lists_in_pages_then_follows_changes(
    running: tuple[Informer[ConfigMap], list[Change], Metrics], kube_client: KubeClient
) -> None:
    informer, changes, _ = running
    assert len(informer.cache) == 20  # 3 pages of 7
    assert sorted(c[1] for c in changes) == sorted(f"cm{i}" for i in range(20))
    changes.clear()
    await kube_client.create(CONFIG_MAPS, config_map("new", "1"), namespace="default")
    await put(kube_client, "cm3", "9")
    await kube_client.delete(CONFIG_MAPS, "cm4", namespace="default")
    await wait_for(lambda: len(changes) == 3, what="three changes")
    assert changes == [("added", "new", "1"), ("updated", "cm3", "9"), ("deleted", "cm4", "0")]
    cm3 = informer.cache.get("default/cm3")
    assert cm3 is not None and cm3.data == {"v": "9"}
    assert [cm.metadata.name for cm in informer.cache.by_index("value", "9")] == ["cm3"]
    assert informer.cache.get("default/cm4") is None


def held(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("cdo_informer_objects", {"resource": "configmaps"})


async def test_the_objects_gauge_follows_the_cache_and_drops_with_the_informer(
    running: tuple[Informer[ConfigMap], list[Change], Metrics], kube_client: KubeClient
) -> None:
    informer, _, metrics = running
    assert held(metrics) == 20
    await kube_client.create(CONFIG_MAPS, config_map("one-more", "1"), namespace="default")
    await kube_client.delete(CONFIG_MAPS, "cm0", namespace="default")
    await kube_client.delete(CONFIG_MAPS, "cm1", namespace="default")
    await wait_for(lambda: len(informer.cache) == 19, what="one added, two deleted")
    assert held(metrics) == 19
    # A second informer of the resource in the same service adds its cache; a stopped one
    # takes its share away.
    other = Informer(
        kube_client, CONFIG_MAPS, ConfigMap, namespace="default", settings=FAST, metrics=metrics
    )
    task = asyncio.create_task(other.run())
    await wait_for(lambda: other.synced, what="the second informer's list")
    assert held(metrics) == 38
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert held(metrics) == 19


async def test_a_dropped_watch_resumes_without_relisting_or_losing_updates(
    running: tuple[Informer[ConfigMap], list[Change], Metrics],
    kube_client: KubeClient,
    emulator: KubeServer,
) -> None:
    _informer, changes, metrics = running
    changes.clear()
    for round_ in range(3):
        emulator.faults.drop_watches()
        await put(kube_client, "cm1", f"r{round_}")
    await wait_for(lambda: ("updated", "cm1", "r2") in changes, what="update after drops")
    assert lists(metrics, "expired") == 0
    assert lists(metrics, "start") == 1


async def test_410_relists_and_reports_what_happened_while_away(
    running: tuple[Informer[ConfigMap], list[Change], Metrics],
    kube_client: KubeClient,
    emulator: KubeServer,
) -> None:
    _informer, changes, metrics = running
    changes.clear()
    # Keep the informer from watching while two changes happen, then forget the history.
    emulator.faults.fail_next(3, code=500, verbs={"watch"}, resource="configmaps")
    emulator.faults.drop_watches()
    await kube_client.delete(CONFIG_MAPS, "cm5", namespace="default")
    await put(kube_client, "cm6", "while-away")
    emulator.compact()
    await wait_for(lambda: lists(metrics, "expired") >= 1, what="relist after 410")
    await wait_for(lambda: len(changes) == 2, what="the missed changes")
    assert sorted(changes) == [("deleted", "cm5", "0"), ("updated", "cm6", "while-away")]
    await put(kube_client, "cm7", "after")
    await wait_for(lambda: ("updated", "cm7", "after") in changes, what="following again")


async def test_an_error_event_410_on_watch_relists(
    running: tuple[Informer[ConfigMap], list[Change], Metrics],
    kube_client: KubeClient,
    emulator: KubeServer,
) -> None:
    _informer, changes, metrics = running
    emulator.faults.expire_next_watch(resource="configmaps")
    emulator.faults.drop_watches()
    await wait_for(lambda: lists(metrics, "expired") == 1, what="relist")
    changes.clear()
    await put(kube_client, "cm2", "x")
    await wait_for(lambda: changes == [("updated", "cm2", "x")], what="update after relist")


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_failing_lists_and_watches_are_retried(
    kube_client: KubeClient, emulator: KubeServer, code: int
) -> None:
    await kube_client.create(CONFIG_MAPS, config_map("a", "1"), namespace="default")
    emulator.faults.fail_next(2, code=code, verbs={"list"}, resource="configmaps")
    informer = Informer(kube_client, CONFIG_MAPS, ConfigMap, settings=FAST)
    changes: list[Change] = []
    informer.add_handler(recorder(changes))
    task = asyncio.create_task(informer.run())
    try:
        await wait_for(lambda: informer.synced, what="list after failures")
        emulator.faults.fail_next(2, code=code, verbs={"watch"}, resource="configmaps")
        emulator.faults.drop_watches()
        await put(kube_client, "a", "2")
        await wait_for(lambda: ("updated", "a", "2") in changes, what="update after failures")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_handlers_added_later_see_the_cache_and_a_failing_handler_is_contained(
    running: tuple[Informer[ConfigMap], list[Change], Metrics], kube_client: KubeClient
) -> None:
    informer, changes, metrics = running
    late: list[Change] = []
    informer.add_handler(recorder(late))
    assert len(late) == len(informer.cache)

    def broken(_old: ConfigMap | None, _new: ConfigMap | None) -> None:
        raise RuntimeError("bug in a handler")

    informer.add_handler(broken)
    changes.clear()
    await put(kube_client, "cm0", "still-works")
    await wait_for(lambda: ("updated", "cm0", "still-works") in changes, what="update")
    errors = metrics.registry.get_sample_value(
        "cdo_informer_handler_errors_total", {"resource": "configmaps"}
    )
    assert errors is not None and errors >= 1


Digits = Annotated[str, msgspec.Meta(pattern="^[0-9]+$")]


class Counter(KubeObject, frozen=True, kw_only=True):
    """A build that reads ``data.v`` as digits only: any other value does not decode."""

    data: dict[str, Digits] = msgspec.field(default_factory=dict)


async def test_an_object_that_does_not_decode_is_skipped_counted_and_logged_once(
    kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in (("one", "1"), ("odd", "x"), ("two", "2")):
        await kube_client.create(CONFIG_MAPS, config_map(name, value), namespace="default")
    metrics = Metrics()
    informer = Informer(
        kube_client, CONFIG_MAPS, Counter, namespace="default", settings=FAST, metrics=metrics
    )
    changes: list[Change] = []
    informer.add_handler(recorder(changes))  # type: ignore[arg-type]

    def skipped() -> float:
        value = metrics.registry.get_sample_value(
            "cdo_informer_undecodable_total", {"resource": "configmaps"}
        )
        return value or 0.0

    def logged(key: str) -> int:
        return sum(
            1
            for record in caplog.records
            if record.getMessage().startswith("object skipped")
            and getattr(record, "key", "") == key
        )

    task = asyncio.create_task(informer.run())
    try:
        await wait_for(lambda: informer.synced, what="the list")
        assert sorted(informer.cache.keys()) == ["default/one", "default/two"]
        assert skipped() == 1 and logged("default/odd") == 1
        # Still odd: counted again, logged no more; the informer follows the others meanwhile.
        await put(kube_client, "odd", "y")
        await kube_client.create(CONFIG_MAPS, config_map("three", "3"), namespace="default")
        await wait_for(lambda: informer.cache.get("default/three"), what="a later object")
        assert skipped() == 2 and logged("default/odd") == 1
        # Readable again: it joins the cache.
        await put(kube_client, "odd", "4")
        await wait_for(lambda: ("added", "odd", "4") in changes, what="odd readable")
        # A cached object that stops decoding keeps its last readable version, deleted or not
        # (a relist keeps it too), and goes once it is deleted.
        await put(kube_client, "one", "z")
        await put(kube_client, "two", "5")
        await wait_for(lambda: ("updated", "two", "5") in changes, what="the next change")
        cached = informer.cache.get("default/one")
        assert cached is not None and cached.data == {"v": "1"}
        assert not [change for change in changes if change[0] == "deleted"]
        assert logged("default/one") == 1
        await kube_client.delete(CONFIG_MAPS, "one", namespace="default")
        await wait_for(lambda: ("deleted", "one", "1") in changes, what="one deleted")
        assert informer.cache.get("default/one") is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_relist_keeps_the_last_readable_version_of_an_object_that_stopped_decoding(
    kube_client: KubeClient, emulator: KubeServer
) -> None:
    await kube_client.create(CONFIG_MAPS, config_map("kept", "1"), namespace="default")
    informer = Informer(kube_client, CONFIG_MAPS, Counter, namespace="default", settings=FAST)
    changes: list[Change] = []
    informer.add_handler(recorder(changes))  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        await wait_for(lambda: informer.synced, what="the list")
        await put(kube_client, "kept", "not digits")
        emulator.faults.expire_next_watch(resource="configmaps")
        emulator.faults.drop_watches()
        await kube_client.create(CONFIG_MAPS, config_map("after", "2"), namespace="default")
        await wait_for(lambda: ("added", "after", "2") in changes, what="relisted")
        cached = informer.cache.get("default/kept")
        assert cached is not None and cached.data == {"v": "1"}
        assert [change for change in changes if change[1] == "kept"] == [("added", "kept", "1")]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("code", [429, 503])
async def test_a_throttled_list_waits_for_the_retry_after(
    kube_client: KubeClient, emulator: KubeServer, code: int
) -> None:
    """429 and 503 with ``Retry-After``: the informer waits that long, whatever its backoff."""
    emulator.faults.fail_next(1, code=code, retry_after=1, verbs={"list"})
    informer = Informer(kube_client, CONFIG_MAPS, ConfigMap, settings=FAST)
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = asyncio.create_task(informer.run())
    try:
        await wait_for(lambda: informer.synced, what=f"list after a {code}")
        assert loop.time() - started >= 1.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
