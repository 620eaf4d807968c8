"""The leader's own Placement writes (shared/kube/ownwrites.py), until the informer shows them."""

from __future__ import annotations

import msgspec

from shared.crds.placement import Placement
from shared.kube.ownwrites import OwnWrites

from .builders import record


def placement(rv: str, uid: str = "u1", channel: int = 0) -> Placement:
    body = {
        "metadata": {"name": "train", "namespace": "default", "uid": uid, "resourceVersion": rv},
        "spec": msgspec.to_builtins(record(("a-n00", 1, ()), channel=channel)),
    }
    return msgspec.convert(body, type=Placement)


def test_our_writes_win_until_the_cache_catches_up() -> None:
    book = OwnWrites[Placement]()
    v1, v2 = placement("1"), placement("2", channel=1)
    book.wrote(v1)
    book.wrote(v2)
    assert book.current("default/train", None) == v2
    assert not book.observe(None, v1)  # our older echo: still ours
    assert book.current("default/train", v1) == v2
    assert not book.observe(v1, v2)  # the newest echo: caught up
    assert len(book) == 0
    assert book.current("default/train", v2) == v2


def test_a_change_by_someone_else_hands_the_key_back_to_the_cache() -> None:
    book = OwnWrites[Placement]()
    book.wrote(placement("1"))
    foreign = placement("7", channel=5)
    assert book.observe(placement("1"), foreign)
    assert book.current("default/train", foreign) == foreign


def test_deletions() -> None:
    book = OwnWrites[Placement]()
    book.wrote(placement("1"))
    book.deleted("default/train", uid="u1")
    assert book.current("default/train", placement("1")) is None  # the cache still has it
    assert not book.observe(placement("1"), None)  # our deletion arrives
    assert book.current("default/train", None) is None and len(book) == 0
    # Deleted by someone else:
    assert book.observe(placement("3"), None)


def test_a_late_deletion_of_an_earlier_incarnation_leaves_the_new_record() -> None:
    book = OwnWrites[Placement]()
    book.deleted("default/train", uid="old")
    fresh = placement("9", uid="new")
    book.wrote(fresh)
    assert not book.observe(placement("5", uid="old"), None)
    assert book.current("default/train", None) == fresh


def test_after_a_conflict_the_apis_version_is_adopted() -> None:
    book = OwnWrites[Placement]()
    book.wrote(placement("1"))
    fresh = placement("4", channel=2)
    book.adopt("default/train", fresh)
    assert book.current("default/train", placement("1")) == fresh
    assert not book.observe(placement("1"), fresh)  # the informer catches up
    assert len(book) == 0
    book.adopt("default/train", None)
    assert book.current("default/train", None) is None
