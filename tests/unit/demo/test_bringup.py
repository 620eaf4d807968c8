"""The demo's health timings and log tails."""

from __future__ import annotations

from pathlib import Path

from sim.demo.bringup import HEALTH_TIMINGS, free_imex_ports, log_tail, shorten_health_timings


def test_health_timings_are_shortened_unless_the_environment_chooses_others() -> None:
    environ = {"CDO_HEALTH_HOLD_DOWN_S": "10"}
    used = shorten_health_timings(environ)
    assert used == {
        "CDO_HEALTH_XID_LATCH_S": HEALTH_TIMINGS["CDO_HEALTH_XID_LATCH_S"],
        "CDO_HEALTH_HOLD_DOWN_S": "10",
    }
    assert environ == used


def test_imex_ports_are_two_distinct_ports() -> None:
    server, command = free_imex_ports()
    assert server != command
    assert 0 < server < 65536 and 0 < command < 65536


def test_a_log_tail_is_its_last_lines_or_says_there_is_none(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert log_tail(log, lines=2) == ["| line 28", "| line 29"]
    assert log_tail(tmp_path / "missing.log") == [f"(no log at {tmp_path / 'missing.log'})"]
