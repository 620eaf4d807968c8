"""Prometheus' promtool, for the checks of cdo's metrics and alerts.

``./task test`` puts it in .venv/bin (``./task tools:promtool``, from Debian's prometheus
package) when it can; a test that needs it and finds none skips, saying what to install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MISSING = (
    "promtool not found: run `./task tools:promtool` (it unpacks Debian's prometheus package "
    "into .venv/bin), or put Prometheus' promtool on PATH"
)


def promtool() -> str:
    """The promtool next to this Python, else on PATH; skips the test when there is none."""
    beside = Path(sys.executable).parent / "promtool"
    if beside.is_file():
        return str(beside)
    found = shutil.which("promtool")
    if found is None:
        pytest.skip(MISSING)
    return found


def run(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> tuple[int, str]:
    """``promtool <args>``: its exit status and everything it printed."""
    result = subprocess.run(
        [promtool(), *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return result.returncode, (result.stdout + result.stderr).decode(errors="replace")


def check_metrics(exposition: bytes) -> tuple[int, str]:
    """``promtool check metrics`` on one /metrics body (exit 0: no lint problem)."""
    return run("check", "metrics", stdin=exposition)
