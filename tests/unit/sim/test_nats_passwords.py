"""Generated NATS passwords are read by nats-server as config values: each starts with a letter,
so that none is parsed as a number or a date (a password starting "2024-" stopped the server)."""

from __future__ import annotations

from pathlib import Path

from sim.control.natsauth import callout_keys


def test_every_generated_callout_password_starts_with_a_letter(tmp_path: Path) -> None:
    for attempt in range(200):
        state = tmp_path / str(attempt)
        state.mkdir()
        keys = callout_keys(state)
        assert keys.password[0].isalpha(), keys.password
