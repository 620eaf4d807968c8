"""Quantities in milli-units, rounded up."""

from __future__ import annotations

import pytest

from shared.scheduling.quantity import QuantityError, format_milli, parse_milli, parse_milli_or_zero


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1", 1000),
        ("4", 4000),
        ("100m", 100),
        ("1.5", 1500),
        (".5", 500),
        ("1k", 1_000_000),
        ("1Ki", 1024_000),
        ("2Gi", 2 * 2**30 * 1000),
        ("500M", 500 * 10**6 * 1000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("1n", 1),  # rounded up
        ("0", 0),
        ("-2", -2000),
        (" 3 ", 3000),
    ],
)
def test_parse(text: str, milli: int) -> None:
    assert parse_milli(text) == milli


@pytest.mark.parametrize("text", ["", "abc", "1Xi", "1.2.3", "Gi"])
def test_rejects_what_is_not_a_quantity(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_milli(text)
    assert parse_milli_or_zero(text) == 0


def test_format() -> None:
    assert format_milli(2000) == "2"
    assert format_milli(1500) == "1500m"
