"""``python -m bench.ui`` on two racks in a real headless Chromium: the page's feed comes up on
the stream the NATS bootstrap makes, every GPU is drawn, and the bench ends with its RESULT
line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.browser import executable


def test_the_ui_bench_measures_a_repaint_and_a_first_paint_and_prints_its_result_line() -> None:
    if executable() is None:
        pytest.skip("no chromium: ./task tools:chromium installs Debian's")
    done = subprocess.run(
        [sys.executable, "-m", "bench.ui", "--racks", "2", "--events", "3", "--loads", "1"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (drawn,) = [line for line in done.stdout.splitlines() if line.startswith("GPUs drawn")]
    assert drawn.split()[-1] == "144", done.stdout  # 2 racks x 18 trays x 4 GPUs
    (result,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    fields = dict(item.split("=", 1) for item in result.split()[1:])
    assert tuple(fields) == ("ui_event_to_paint_p99_ms", "ui_first_paint_ms_2racks")
    assert all(float(value) > 0 for value in fields.values())
