"""Operator overrides: CDO_HEALTH_XID_OVERRIDES and CDO_HEALTH_SIGNAL_OVERRIDES."""

from __future__ import annotations

import pytest

from services.health_monitor import (
    Action,
    ClassificationSettings,
    Classifier,
    Override,
    Severity,
    classifier_from_settings,
    load_classifier,
    parse_value,
)
from services.health_monitor.settings import ENV_PREFIX
from services.health_monitor.signals import GpuLost, NvLinkDown, NvmlUnavailable, XidError
from shared.errors import ConfigError
from shared.settings import describe_settings

XID_VAR = "CDO_HEALTH_XID_OVERRIDES"
SIGNAL_VAR = "CDO_HEALTH_SIGNAL_OVERRIDES"


def xid(classifier: Classifier, number: int) -> tuple[str, Severity, Action, bool]:
    verdict = classifier.classify(XidError(gpu=0, xid=number))
    return verdict.rule, verdict.severity, verdict.action, verdict.ignored


def test_no_variables_means_the_default_table() -> None:
    classifier = load_classifier({})
    assert xid(classifier, 79) == ("xid.79", Severity.FATAL, Action.DRAIN_NODE, False)


def test_documented_example() -> None:
    classifier = load_classifier({XID_VAR: "79=warning:reset_gpu,13=ignore"})
    assert xid(classifier, 79) == ("xid.79", Severity.WARNING, Action.RESET_GPU, False)
    # An ignored signal is neither classified nor counted.
    assert xid(classifier, 13) == ("xid.13", Severity.OK, Action.NONE, True)
    assert xid(classifier, 48)[1] is Severity.FATAL  # untouched rows stay


def test_severity_alone_keeps_the_rows_action() -> None:
    classifier = load_classifier({XID_VAR: "95=warning"})
    assert xid(classifier, 95)[1:3] == (Severity.WARNING, Action.RESET_GPU)


def test_ranges_and_later_entries_win() -> None:
    classifier = load_classifier({XID_VAR: "144-150=warning:none, 147=fatal"})
    for number in (144, 146, 148, 150):
        assert xid(classifier, number)[1:3] == (Severity.WARNING, Action.NONE)
    # The later entry replaces the range for 147; its action comes from the table row.
    assert xid(classifier, 147)[1:3] == (Severity.FATAL, Action.RESET_GPU)


def test_uncatalogued_xid_gets_its_own_row() -> None:
    classifier = load_classifier({XID_VAR: "999=fatal:drain_node"})
    assert xid(classifier, 999) == ("xid.999", Severity.FATAL, Action.DRAIN_NODE, False)
    assert xid(classifier, 998)[0] == "xid.default"


def test_whitespace_and_case_are_ignored() -> None:
    classifier = load_classifier({XID_VAR: " 79 = Warning : Reset_GPU , 31=IGNORE "})
    assert xid(classifier, 79)[1:3] == (Severity.WARNING, Action.RESET_GPU)
    assert xid(classifier, 31)[3]


def test_signal_overrides() -> None:
    classifier = load_classifier(
        {SIGNAL_VAR: "nvlink.down=fatal,nvml.unavailable=warning:none,xid.default=ok"}
    )
    down = classifier.classify(NvLinkDown(gpu=0, links=(1,), total=18))
    assert (down.severity, down.action) == (Severity.FATAL, Action.RESET_GPU)
    unavailable = classifier.classify(NvmlUnavailable(reason="gone"))
    assert (unavailable.severity, unavailable.action) == (Severity.WARNING, Action.NONE)
    assert xid(classifier, 5000)[1] is Severity.OK
    assert classifier.classify(GpuLost(gpu=0)).severity is Severity.FATAL


def test_both_variables_together() -> None:
    settings = ClassificationSettings(
        xid_overrides=("79=warning",), signal_overrides=("gpu.lost=ignore",)
    )
    classifier = classifier_from_settings(settings)
    assert xid(classifier, 79)[1] is Severity.WARNING
    assert classifier.classify(GpuLost(gpu=0)).ignored


@pytest.mark.parametrize(
    ("text", "override"),
    [
        ("ignore", Override(ignore=True)),
        ("ok", Override(severity=Severity.OK)),
        (
            "fatal:recover_imex_domain",
            Override(severity=Severity.FATAL, action=Action.RECOVER_IMEX_DOMAIN),
        ),
        ("warning:none", Override(severity=Severity.WARNING, action=Action.NONE)),
    ],
)
def test_values(text: str, override: Override) -> None:
    assert parse_value(text) == override


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("79", "missing '='"),
        ("=fatal", "missing key"),
        ("abc=fatal", "'abc' is not an XID number"),
        ("-1=fatal", "is not an XID number"),
        ("0=fatal", "outside 1.."),
        ("4294967296=fatal", "outside 1.."),
        ("150-144=fatal", "range 150-144 is empty"),
        ("1-5000=fatal", "spans more than 1024"),
        ("79=warn", "unknown severity 'warn'"),
        ("79=", "unknown severity ''"),
        ("79=fatal:reboot", "unknown action 'reboot'"),
        ("79=fatal:", "empty action"),
        ("79=ignore:none", "unknown severity 'ignore'"),
    ],
)
def test_bad_xid_entries_name_the_variable_and_the_entry(value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_classifier({XID_VAR: f"13=ignore,{value}"})
    message = str(raised.value)
    assert message.startswith(f"{XID_VAR}: entry {value!r}: ")
    assert problem in message
    assert "expected XID=VALUE" in message


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("nvlink.dwn=fatal", "unknown rule 'nvlink.dwn'"),
        ("gpu.lost", "missing '='"),
        ("gpu.lost=severe", "unknown severity 'severe'"),
    ],
)
def test_bad_signal_entries_name_the_variable_and_the_entry(value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_classifier({SIGNAL_VAR: value})
    message = str(raised.value)
    assert message.startswith(f"{SIGNAL_VAR}: entry {value!r}: ")
    assert problem in message


def test_another_prefix_is_named_in_errors() -> None:
    with pytest.raises(ConfigError, match=r"^MONITOR_XID_OVERRIDES: "):
        load_classifier({"MONITOR_XID_OVERRIDES": "x=y"}, prefix="MONITOR_")


def test_settings_are_documented() -> None:
    rows = {
        name: description
        for name, _, description in describe_settings(ClassificationSettings, prefix=ENV_PREFIX)
    }
    assert set(rows) == {XID_VAR, SIGNAL_VAR}
    assert all(rows.values())
