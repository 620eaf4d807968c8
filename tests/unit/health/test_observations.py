"""What the monitor knows between evaluations: state faults, latched XIDs, faults seen."""

from __future__ import annotations

from services.health_monitor import classify
from services.health_monitor.faults import Fault, fault_of
from services.health_monitor.observations import Observations
from services.health_monitor.signals import GpuLost, Signal, XidError


def fault(signal: Signal) -> Fault:
    result = fault_of(signal, classify(signal))
    assert result is not None
    return result


XID_79 = fault(XidError(gpu=1, xid=79))
LOST = fault(GpuLost(gpu=1))


def keys(faults: tuple[Fault, ...]) -> set[str]:
    return {f.key for f in faults}


def test_a_latched_fault_stays_active_until_it_expires() -> None:
    observations = Observations(latch_s=10)
    assert observations.latch(XID_79, now=0) is True
    assert keys(observations.active(9.9)) == {"xid.79@gpu1"}
    assert observations.next_expiry() == 10
    assert observations.active(10) == ()
    assert observations.next_expiry() is None


def test_an_expired_latch_is_seen_once_more() -> None:
    observations = Observations(latch_s=10)
    observations.latch(XID_79, now=0)
    observations.take_seen(5)
    assert keys(observations.take_seen(10)) == {"xid.79@gpu1"}  # it ended just now
    assert observations.take_seen(11) == ()


def test_a_repeated_xid_extends_its_latch() -> None:
    observations = Observations(latch_s=10)
    observations.latch(XID_79, now=0)
    assert observations.latch(XID_79, now=8) is False
    assert keys(observations.active(15)) == {"xid.79@gpu1"}


def test_a_reading_replaces_the_state_faults() -> None:
    observations = Observations(latch_s=10)
    assert observations.update_reading([LOST], clique=None) is True
    assert observations.update_reading([LOST], clique=None) is False
    assert keys(observations.active(0)) == {"gpu.lost@gpu1"}
    assert observations.update_reading([], clique=None) is True
    assert observations.active(0) == ()


def test_faults_seen_between_evaluations_are_not_lost() -> None:
    observations = Observations(latch_s=10)
    observations.update_reading([LOST], clique=None)
    observations.update_reading([], clique=None)  # cleared before anyone evaluated
    assert keys(observations.take_seen(0)) == {"gpu.lost@gpu1"}
    assert observations.take_seen(0) == ()


def test_unavailable_is_reported_with_the_reading() -> None:
    observations = Observations(latch_s=10)
    assert observations.update_reading([], clique=None, unavailable="driver gone") is True
    assert observations.unavailable == "driver gone"
    assert observations.update_reading([], clique=None) is True
    assert observations.unavailable is None
