"""The real IMEX programs are looked for before a start: on PATH, or at the path a command names."""

from __future__ import annotations

import sys
from pathlib import Path

from services.imex_agent.programs import CommandImex, LauncherImex


def test_the_real_programs_are_looked_for_on_path_and_by_path(tmp_path: Path) -> None:
    present = (sys.executable, "-m", "sim.imex.ctl")
    imex = CommandImex(daemon_argv=(str(tmp_path / "nvidia-imex"),), ctl_argv=present)
    assert imex.missing_programs() == (str(tmp_path / "nvidia-imex"),)
    imex = CommandImex(daemon_argv=("no-such-imex-program",), ctl_argv=("no-such-imex-ctl",))
    assert imex.missing_programs() == ("no-such-imex-program", "no-such-imex-ctl")
    assert CommandImex(daemon_argv=present, ctl_argv=present).missing_programs() == ()


def test_the_launcher_handle_looks_for_the_daemon_the_launcher_runs(tmp_path: Path) -> None:
    imex = LauncherImex(
        socket=tmp_path / "launcher.sock",
        ctl_argv=(sys.executable,),
        daemon_argv=(str(tmp_path / "nvidia-imex"), "--extra"),
    )
    assert imex.missing_programs() == (str(tmp_path / "nvidia-imex"),)
