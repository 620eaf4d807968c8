"""Reading the controller's own ComputeDomain writes until its cache shows them."""

from __future__ import annotations

import msgspec

from shared.crds.computedomain import ComputeDomain
from shared.kube.ownwrites import OwnWrites


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
    own = OwnWrites[ComputeDomain]()
    v1, v2 = version("1"), version("2", "f")
    own.wrote(v2)
    assert own.current("ns/d", v1) is v2
    assert own.current("ns/d", v2) is v2  # caught up: the cache is trusted again
    assert len(own) == 0
    assert own.current("ns/d", v1) is v1


def test_successive_writes_chain() -> None:
    own = OwnWrites[ComputeDomain]()
    v1, v2, v3 = version("1"), version("2", "f"), version("3", "f")
    own.wrote(v2)
    own.wrote(v3)
    assert own.current("ns/d", v1) is v3
    assert not own.observe(v1, v2)  # our older echo
    assert own.current("ns/d", v2) is v3


def test_someone_elses_newer_write_or_a_deletion_wins() -> None:
    own = OwnWrites[ComputeDomain]()
    own.wrote(version("2", "f"))
    theirs = version("7", "f", "other")
    assert own.observe(version("1"), theirs)  # not a version we wrote
    assert own.current("ns/d", theirs) is theirs
    own.wrote(version("8"))
    assert own.observe(theirs, None)  # deleted by someone else: our record goes
    assert own.current("ns/d", None) is None
    assert len(own) == 0
