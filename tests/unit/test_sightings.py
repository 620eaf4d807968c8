"""Durations on one clock: an age starts when a key is first seen and is forgotten with it."""

from __future__ import annotations

from shared.sightings import Sightings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_age_starts_at_the_first_sighting_and_grows_on_this_clock() -> None:
    clock = Clock()
    seen: Sightings[str] = Sightings(clock)
    assert seen.age_s("a") == 0
    clock.now += 7
    assert seen.age_s("a") == 7
    assert seen.age_s("b") == 0  # a key written again (a new stamp) is a new sighting


def test_forgotten_keys_start_again() -> None:
    clock = Clock()
    seen: Sightings[tuple[str, int]] = Sightings(clock)
    seen.age_s(("d", 0))
    seen.age_s(("d", 1))
    seen.age_s(("e", 0))
    clock.now += 5
    seen.retain([("d", 0), ("e", 0)])
    assert len(seen) == 2
    seen.forget_where(lambda key: key[0] == "e")
    assert len(seen) == 1
    assert seen.age_s(("d", 0)) == 5
    assert seen.age_s(("d", 1)) == 0
