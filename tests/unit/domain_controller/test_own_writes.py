"""Reading the controller's own writes until its cache shows them."""

from __future__ import annotations

import msgspec

from services.domain_controller.writes import OwnWrites
from shared.crds.computedomain import ComputeDomain


def version(rv: str, *finalizers: str) -> ComputeDomain:
    return msgspec.convert(
        {
            "metadata": {
                "name": "d",
                "namespace": "ns",
                "resourceVersion": rv,
                "finalizers": list(finalizers),
            },
            "spec": {"channel": {"resourceClaimTemplate": {"name": "t"}}},
        },
        ComputeDomain,
    )


def test_a_stale_cache_is_overridden_by_what_was_written() -> None:
    own = OwnWrites()
    v1, v2 = version("1"), version("2", "f")
    own.remember(v1, v2)
    assert own.latest("ns/d", v1) is v2
    assert own.latest("ns/d", v2) is v2  # caught up: the cache is trusted again
    assert len(own) == 0
    assert own.latest("ns/d", v1) is v1


def test_successive_writes_chain() -> None:
    own = OwnWrites()
    v1, v2, v3 = version("1"), version("2", "f"), version("3", "f")
    own.remember(v1, v2)
    own.remember(v2, v3)
    assert own.latest("ns/d", v1) is v3
    assert own.latest("ns/d", v2) is v3


def test_someone_elses_newer_write_or_a_deletion_wins() -> None:
    own = OwnWrites()
    own.remember(version("1"), version("2", "f"))
    theirs = version("7", "f", "other")
    assert own.latest("ns/d", theirs) is theirs
    own.remember(version("7"), version("8"))
    assert own.latest("ns/d", None) is None
    assert len(own) == 0
