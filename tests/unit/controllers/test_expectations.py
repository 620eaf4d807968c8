"""Outstanding writes: a controller's own creates and deletes its cache has not shown yet."""

from __future__ import annotations

import msgspec

from shared.kube.models import Pod
from sim.controllers.expectations import Expectations
from tests.unit.controllers.builders import pod


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def created(name: str, rv: str) -> Pod:
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "resourceVersion": rv,
            }
        },
        Pod,
    )


def make(version: list[str], clock: Clock) -> Expectations:
    return Expectations(cache_version=lambda: version[0], ttl_s=60, clock=clock)


def test_a_create_is_outstanding_until_the_cache_has_it() -> None:
    version, clock = ["10"], Clock()
    exp = make(version, clock)
    exp.created("owner", created("a", "11"), tag="t")
    assert [c.name for c in exp.outstanding("owner", []).creates] == ["a"]
    assert exp.outstanding("owner", []).tags() == ["t"]
    assert exp.outstanding("owner", [pod("a")]).creates == ()
    assert exp.outstanding("owner", []).creates == ()  # forgotten once seen


def test_a_cache_past_the_create_means_it_came_and_went() -> None:
    version, clock = ["10"], Clock()
    exp = make(version, clock)
    exp.created("owner", created("a", "11"))
    version[0] = "11"
    assert exp.outstanding("owner", []).creates == ()


def test_unparsable_versions_fall_back_to_the_ttl() -> None:
    version, clock = ["x"], Clock()
    exp = make(version, clock)
    exp.created("owner", created("a", "opaque"))
    clock.now = 59
    assert len(exp.outstanding("owner", []).creates) == 1
    clock.now = 60
    assert exp.outstanding("owner", []).creates == ()


def test_a_delete_is_outstanding_while_the_cache_shows_the_pod_alive() -> None:
    version, clock = ["10"], Clock()
    exp = make(version, clock)
    exp.deleted("owner", "uid-a")
    assert exp.outstanding("owner", [pod("a")]).deletes == {"uid-a"}
    assert exp.outstanding("owner", [pod("a", deleting=True)]).deletes == frozenset()
    exp.deleted("owner", "uid-b")
    assert exp.outstanding("owner", []).deletes == frozenset()


def test_owners_are_independent_and_can_be_forgotten() -> None:
    version, clock = ["10"], Clock()
    exp = make(version, clock)
    exp.created("one", created("a", "11"))
    exp.created("two", created("b", "11"))
    exp.forget("one")
    assert exp.outstanding("one", []).creates == ()
    assert [c.name for c in exp.outstanding("two", []).creates] == ["b"]
