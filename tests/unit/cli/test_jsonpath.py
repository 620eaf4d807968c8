"""``-o jsonpath=`` and ``-o custom-columns=`` over a command's document, ``cdo wait``'s
``--for`` and ``--timeout``, and the progress lines of a long wait (pure parts).
tests/integration/cli/test_habits.py holds the same templates against real kubectl's."""

from __future__ import annotations

from typing import Any

import pytest

from cli.jsonpath import JsonPathError, column_rows, jsonpath
from cli.output import OutputFormats
from cli.wait import Wanted, domain_name, parse_for, parse_timeout
from shared.command_errors import UsageError
from sim.control.processes import poll

DOC: dict[str, Any] = {
    "domains": [
        {"namespace": "ml", "name": "big", "phase": "Ready", "channel": 3,
         "members": [{"node": "a1"}]},
        {"namespace": "ml", "name": "small", "phase": "Pending", "channel": None,
         "members": []},
    ],
    "notes": [],
    "ok": True,
}  # fmt: skip


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.domains[*].name}", "big small"),
        ("{.domains[0].phase}", "Ready"),
        ("{.domains[-1].name}", "small"),
        ("{.domains[0:1].name}", "big"),
        ("{.domains[1]['name']}", "small"),
        ('{range .domains[*]}{.namespace}/{.name}{"\\n"}{end}', "ml/big\nml/small\n"),
        ('{.domains[?(@.phase=="Ready")].name}', "big"),
        ("{.domains[?(@.channel > 2)].name}", "big"),
        ("{.domains[?(@.members[0].node)].name}", "big"),
        ("{..node}", "a1"),
        ("name={.domains[0].name} ok={.ok}", "name=big ok=true"),
        ("{.domains[0].members}", '[{"node":"a1"}]'),
        ("{.notes}", "[]"),
    ],
)
def test_templates_print_as_kubectl_prints_them(template: str, printed: str) -> None:
    assert jsonpath(template, DOC) == printed


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{.domains[0].nope}", "jsonpath: .domains[0].nope is not found (nope is missing)"),
        ("{.domains[", "jsonpath: unclosed {"),
        ("{range .domains[*]}{.name}", "{range} without {end}"),
        ("{.domains[?(@.phase ~ 1)]}", "cannot parse"),
    ],
)
def test_a_template_that_fails_says_why(template: str, said: str) -> None:
    with pytest.raises(JsonPathError, match=None) as failure:
        jsonpath(template, DOC)
    assert said in str(failure.value)
    assert failure.value.exit_code == 1


def test_custom_columns_make_one_row_per_item() -> None:
    headers, rows = column_rows(
        "NAME:.name,CHANNEL:{.channel},NODES:.members[*].node", DOC["domains"]
    )
    assert headers == ["NAME", "CHANNEL", "NODES"]
    assert rows == [["big", "3", "a1"], ["small", "<none>", "<none>"]]
    with pytest.raises(JsonPathError, match="not HEADER:EXPRESSION"):
        column_rows("NAME", DOC["domains"])


def test_the_output_option_takes_templates_and_lists_their_prefixes() -> None:
    formats = OutputFormats(("json", "jsonpath=", "custom-columns="))
    assert "json" in formats and "jsonpath={.a}" in formats and "custom-columns=A:.a" in formats
    assert "jsonpath=" not in formats[3:] and "yaml" not in formats and "jsonpath" not in formats
    assert "jsonpath={.a}" not in OutputFormats(("json",))


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ("condition=Ready", Wanted("condition", "Ready", "True")),
        ("condition=Degraded=false", Wanted("condition", "Degraded", "false")),
        ("jsonpath={.status.status}=Ready", Wanted("jsonpath", ".status.status", "Ready")),
        ("jsonpath='{.status.clique}'", Wanted("jsonpath", ".status.clique", "")),
        ("delete", Wanted("delete")),
    ],
)
def test_for_reads_as_kubectl_wait_reads_it(given: str, wanted: Wanted) -> None:
    assert parse_for(given) == wanted


def test_a_condition_is_met_by_its_status_whatever_the_case() -> None:
    domain = {"status": {"status": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert Wanted("condition", "ready", "true").met(domain)
    assert not Wanted("condition", "Degraded", "True").met(domain)
    assert Wanted("jsonpath", ".status.status", "Ready").met(domain)
    assert not Wanted("jsonpath", ".status.nope", "Ready").met(domain)
    assert Wanted("delete").met(None) and not Wanted("condition", "Ready", "True").met(None)


def test_bad_waits_are_usage_errors() -> None:
    for bad in ("condition", "ready", "jsonpath=.a"):
        with pytest.raises(UsageError, match="--for"):
            parse_for(bad)
    with pytest.raises(UsageError, match="--timeout=soon"):
        parse_timeout("soon")
    with pytest.raises(UsageError, match="waits for ComputeDomains"):
        domain_name("pod/x")
    assert [parse_timeout(t) for t in ("30s", "5m", "1h", "500ms", "0", "12")] == [
        30.0, 300.0, 3600.0, 0.5, 0.0, 12.0,
    ]  # fmt: skip
    assert parse_timeout("-1") == 7 * 86400
    assert [domain_name(t) for t in ("a", "cd/a", "computedomain/a")] == ["a"] * 3


def test_a_long_wait_says_how_it_stands() -> None:
    said: list[float] = []
    calls = iter(range(100))

    def probe() -> int | None:
        return n if (n := next(calls)) >= 6 else None

    assert poll(probe, timeout_s=10, interval_s=0.01, progress=said.append, every_s=0.02) == 6
    assert said and said == sorted(said)
    assert poll(lambda: None, timeout_s=0.05, interval_s=0.01) is None
