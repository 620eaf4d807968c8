"""What a step of the episode asks to announce (data from ``advance``), and the announcer acting
on it: the rate limit, a recovery that waits for the Node, the old recovery before a new episode.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.health_monitor.announcer import About, FaultAnnouncer
from services.health_monitor.faults import Fault, Reaction
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.rules import Action, Severity
from services.health_monitor.settings import MonitorSettings
from services.health_monitor.state import (
    AnnounceFaults,
    Announcement,
    AnnounceRecovery,
    Episode,
    advance,
)
from shared.events import Event, NodeFault, NodeRecovered
from shared.metrics import Metrics
from tests.unit.health.test_state import XID_78, XID_79, fault

HOLD = 30.0
ABOUT = About(clique="rack.1", uuids={0: "GPU-0", 1: "GPU-1"})


XID_54_GPU1 = fault("xid.54", Severity.WARNING, Action.DRAIN_NODE, gpu=1)


# -- advance returns the announcements --------------------------------------------------------


def test_a_first_fault_begins_an_episode_and_is_announced_urgently() -> None:
    step = advance(Episode(), faults=[XID_54_GPU1, XID_79], now=0.0, hold_down_s=HOLD)
    assert step.announcements == (
        AnnounceFaults(faults=(XID_79, XID_54_GPU1), urgent=True, begins_episode=True),
    )


def test_a_warning_that_needs_nothing_begins_an_episode_without_urgency() -> None:
    step = advance(Episode(), faults=[XID_78], now=0.0, hold_down_s=HOLD)
    assert step.announcements == (
        AnnounceFaults(faults=(XID_78,), urgent=False, begins_episode=True),
    )


def test_within_an_episode_only_new_faults_are_announced() -> None:
    episode = advance(Episode(), faults=[XID_54_GPU1], now=0.0, hold_down_s=HOLD).episode
    again = advance(episode, faults=[XID_54_GPU1], now=1.0, hold_down_s=HOLD)
    assert again.announcements == ()
    worse = advance(again.episode, faults=[XID_54_GPU1, XID_79], now=2.0, hold_down_s=HOLD)
    assert worse.announcements == (AnnounceFaults(faults=(XID_79,), urgent=True),)


def test_the_end_of_the_hold_down_announces_the_recovery_of_that_episode() -> None:
    episode = advance(Episode(), faults=[XID_79], now=0.0, hold_down_s=HOLD).episode
    assert advance(episode, faults=[], now=HOLD - 0.1, hold_down_s=HOLD).announcements == ()
    step = advance(episode, faults=[], now=HOLD, hold_down_s=HOLD)
    assert step.episode == Episode()
    assert step.announcements == (AnnounceRecovery(episode=episode),)
    assert advance(step.episode, faults=[], now=HOLD + 1, hold_down_s=HOLD).announcements == ()


# -- the announcer acts on them ---------------------------------------------------------------


class Collected:
    """A publisher that keeps what it was given, as NATS subscribers would receive it."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [type(event).__name__ for event in self.events]


def announcer(
    publisher: Collected, metrics: Metrics, *, event_burst: int = 10, event_rate_per_s: float = 0.2
) -> FaultAnnouncer:
    settings = MonitorSettings(
        hold_down_s=HOLD, event_burst=event_burst, event_rate_per_s=event_rate_per_s
    )
    return FaultAnnouncer(
        node_name="n0",
        publisher=publisher,
        metrics=HealthMetrics(metrics),
        settings=settings,
        tracer=None,
        recorder=None,
        now=0.0,
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def run_episode(a: FaultAnnouncer, faults: Sequence[Fault]) -> Episode:
    step = advance(Episode(), faults=faults, now=0.0, hold_down_s=HOLD)
    await a.announce(step.announcements, now=0.0, about=ABOUT)
    return step.episode


async def end_episode(a: FaultAnnouncer, faults: Sequence[Fault]) -> Episode:
    """Run an episode of ``faults`` to the end of its hold-down; the episode after it."""
    episode = await run_episode(a, faults)
    ended = advance(episode, faults=[], now=HOLD, hold_down_s=HOLD)
    await a.announce(ended.announcements, now=HOLD, about=ABOUT)
    return ended.episode


async def test_fault_events_say_where_and_count_the_episode() -> None:
    published, metrics = Collected(), Metrics()
    await run_episode(announcer(published, metrics), [XID_79])
    (event,) = published.events
    assert isinstance(event, NodeFault)
    assert (event.node, event.clique, event.gpus, event.severity) == (
        "n0",
        "rack.1",
        ("GPU-0",),
        "fatal",
    )
    assert sample(metrics, "cdo_health_fault_episodes_total") == 1
    assert sample(metrics, "cdo_health_fault_events_total", result="published") == 1


async def test_the_rate_limit_holds_back_all_but_the_urgent_fault() -> None:
    published, metrics = Collected(), Metrics()
    a = announcer(published, metrics, event_burst=1, event_rate_per_s=0.0)
    many = tuple(fault(f"xid.{n}", Severity.WARNING, Action.NONE, gpu=n % 2) for n in range(3))
    urgent: Sequence[Announcement] = (
        AnnounceFaults(faults=(XID_79, *many), urgent=True, begins_episode=True),
    )
    await a.announce(urgent, now=0.0, about=ABOUT)
    # The urgent one skips the bucket; the bucket's one token lets one more through.
    assert len(published.events) == 2
    assert sample(metrics, "cdo_health_fault_events_total", result="suppressed") == 2


async def test_a_recovery_waits_until_the_node_shows_no_fault_taint() -> None:
    published, metrics = Collected(), Metrics()
    a = announcer(published, metrics)
    await end_episode(a, [XID_79])
    assert published.kinds() == ["NodeFault"]
    await a.node_written(None, reaction=Reaction.NO_SCHEDULE, about=ABOUT)
    assert published.kinds() == ["NodeFault"]
    await a.node_written(None, reaction=Reaction.NONE, about=ABOUT)
    assert published.kinds() == ["NodeFault", "NodeRecovered"]
    recovered = published.events[-1]
    assert isinstance(recovered, NodeRecovered)
    assert recovered.signals == ("xid",) and recovered.gpus == ("GPU-0",)
    await a.node_written(None, reaction=Reaction.NONE, about=ABOUT)
    assert published.kinds() == ["NodeFault", "NodeRecovered"], "announced once"
    assert sample(metrics, "cdo_health_recoveries_total") == 1


async def test_a_new_episode_announces_the_old_recovery_first() -> None:
    published, metrics = Collected(), Metrics()
    a = announcer(published, metrics)
    ended = await end_episode(a, [XID_79])
    again = advance(ended, faults=[XID_54_GPU1], now=HOLD + 1, hold_down_s=HOLD)
    await a.announce(again.announcements, now=HOLD + 1, about=ABOUT)
    assert published.kinds() == ["NodeFault", "NodeRecovered", "NodeFault"]
    assert sample(metrics, "cdo_health_fault_episodes_total") == 2
