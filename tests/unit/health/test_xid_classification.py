"""The XID rows of the classification table, against NVIDIA's catalog buckets."""

from __future__ import annotations

import pytest

from services.health_monitor import Action, Severity, classify
from services.health_monitor.signals import XidError
from services.health_monitor.xid_catalog import BUCKET_RULES, XID_CATALOG, Bucket

FATAL_XIDS = [48, 74, 79, 95, 119, 120, 140, *range(144, 151)]
APPLICATION_XIDS = [13, 31, 43, 45, 68]


@pytest.mark.parametrize("xid", FATAL_XIDS)
def test_fatal_xids(xid: int) -> None:
    verdict = classify(XidError(gpu=0, xid=xid))
    assert verdict.rule == f"xid.{xid}"
    assert verdict.severity is Severity.FATAL
    assert verdict.action in {Action.RESET_GPU, Action.DRAIN_NODE}
    assert not verdict.ignored


@pytest.mark.parametrize(
    ("xid", "action"),
    [
        (48, Action.RESET_GPU),
        (74, Action.RESET_GPU),
        (79, Action.DRAIN_NODE),  # off the bus: no reset from the host, the node restarts
        (95, Action.RESET_GPU),
        (119, Action.RESET_GPU),
        (120, Action.RESET_GPU),
        (140, Action.RESET_GPU),
        (147, Action.RESET_GPU),
    ],
)
def test_fatal_xid_actions(xid: int, action: Action) -> None:
    assert classify(XidError(gpu=0, xid=xid)).action is action


@pytest.mark.parametrize("xid", APPLICATION_XIDS)
def test_application_xids_change_nothing_but_are_counted(xid: int) -> None:
    verdict = classify(XidError(gpu=0, xid=xid))
    assert verdict.rule == f"xid.{xid}"
    assert verdict.severity is Severity.OK
    assert not verdict.ignored  # counted, unlike an operator's "ignore"


@pytest.mark.parametrize("xid", [13, 31, 45, 68])
def test_application_faults_recommend_restarting_the_application(xid: int) -> None:
    assert classify(XidError(gpu=0, xid=xid)).action is Action.RESTART_APP


@pytest.mark.parametrize(("xid", "entry"), sorted(XID_CATALOG.items()))
def test_every_catalogued_xid_follows_its_bucket(xid: int, entry: tuple[Bucket, str]) -> None:
    bucket, _ = entry
    verdict = classify(XidError(gpu=1, xid=xid))
    assert (verdict.severity, verdict.action) == BUCKET_RULES[bucket]
    assert str(xid) in verdict.summary
    assert bucket.value in verdict.summary


def test_every_bucket_has_a_rule() -> None:
    assert set(BUCKET_RULES) == set(Bucket)


@pytest.mark.parametrize("xid", [1, 999, 2**32 - 1])
def test_xid_outside_the_catalog_is_a_warning_without_action(xid: int) -> None:
    verdict = classify(XidError(gpu=0, xid=xid))
    assert (verdict.rule, verdict.severity, verdict.action) == (
        "xid.default",
        Severity.WARNING,
        Action.NONE,
    )


def test_xid_154_defers_to_the_recovery_action_field() -> None:
    verdict = classify(XidError(gpu=0, xid=154))
    assert (verdict.severity, verdict.action) == (Severity.WARNING, Action.NONE)


def test_xid_without_a_gpu_still_classifies() -> None:
    assert classify(XidError(xid=79)).severity is Severity.FATAL
