"""Durations measured on one clock: how long ago this process first saw something.

A time another machine wrote (a Node's record, a slice's ``waitingSince``) says when that
machine's clock read it; compared with this machine's clock it is off by the skew between the
two, which nothing bounds. A decision that must hold whatever the skew measures instead how long
*this* process has seen the thing, on its own monotonic clock, as leader election measures a
Lease (shared/kube/leader.py)::

    seen = Sightings()
    age_s = seen.age_s(("node-a", "granted", record.at))   # 0 the first time, then growing
    seen.retain(keys_present_now)                          # forget what is gone

The stamp belongs in the key: a thing written again (a new claim, a new wait) is a new sighting.
An age is never more than the true one (it starts when this process first looked), so a
decision that waits for an age waits at least as long as it should; a process that restarts
starts every age again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Sightings(Generic[K]):
    """When each key was first seen, on ``clock`` (monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._first: dict[K, float] = {}

    def __len__(self) -> int:
        return len(self._first)

    def age_s(self, key: K) -> float:
        """Seconds since ``key`` was first seen (0 now, if this is the first time)."""
        now = self._clock()
        first = self._first.setdefault(key, now)
        return max(0.0, now - first)

    def retain(self, keys: Iterable[K]) -> None:
        """Forget every key but ``keys``."""
        keep = set(keys)
        self._first = {key: at for key, at in self._first.items() if key in keep}

    def forget_where(self, gone: Callable[[K], bool]) -> None:
        """Forget the keys for which ``gone(key)`` is true."""
        self._first = {key: at for key, at in self._first.items() if not gone(key)}
