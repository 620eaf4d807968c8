from __future__ import annotations

import io
from pathlib import Path

import msgspec

from sim.imex.config import ImexConfig
from sim.imex.logbook import DaemonLog


def test_records_below_the_level_wait_in_the_verbose_buffer_until_dumped() -> None:
    stream = io.StringIO()
    log = DaemonLog(level=3, stream=stream)

    log.warning("peer lost")
    log.info("connected")
    log.debug("retrying")

    assert "[WARNING]" in stream.getvalue()
    assert "connected" not in stream.getvalue()

    assert log.dump_verbose() == 2
    dumped = stream.getvalue()
    assert dumped.index("connected") < dumped.index("retrying")
    assert log.dump_verbose() == 0


def test_level_zero_writes_nothing_but_still_buffers() -> None:
    stream = io.StringIO()
    log = DaemonLog(level=0, stream=stream)

    log.critical("boom")

    assert stream.getvalue() == ""
    assert log.dump_verbose() == 1
    assert "boom" in stream.getvalue()


def test_an_unwritable_log_file_falls_back_to_the_console(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = msgspec.structs.replace(ImexConfig(), log_file_name=str(blocker / "imex.log"))

    log = DaemonLog.open(config, name="n", fallback="stderr")

    assert log.on_console


def test_a_log_file_is_appended_to_and_rotated(tmp_path: Path) -> None:
    path = tmp_path / "imex.log"
    path.write_text("earlier run\n")
    log = DaemonLog(level=4, stream=path.open("a"), path=path, max_bytes=200, rotate_count=2)

    for index in range(10):
        log.info(f"record {index}")
    log.close()

    rotated = tmp_path / "imex.log.1"
    assert rotated.exists()
    assert "earlier run" in (tmp_path / "imex.log.2").read_text() + rotated.read_text()
    assert "record 9" in path.read_text()
