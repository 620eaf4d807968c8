"""Finding the daemon an earlier agent left running: the record, the identity rule, the handle.

:func:`identify` is checked as a table; :class:`PidProcess` and :func:`adopt_process` with small
real processes (``sleep``), because what they promise (a pidfd that names one process, a daemon
in a session of its own, a parent that reaps it) is the kernel's.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from services.imex_agent.binaries import ImexStartError, NotAdoptableError
from services.imex_agent.launcher import request_refusal
from services.imex_agent.launchprotocol import LaunchRequest
from services.imex_agent.pidprocess import (
    PidProcess,
    adopt_process,
    catches_signal,
    signal_in_masks,
    spawn,
)
from services.imex_agent.preflight import (
    DaemonRecord,
    ProcessFacts,
    ProcessIdentity,
    identify,
    read_process,
    read_record,
    write_record,
)
from tests.support.wait import wait_for

CONFIG = Path("/var/run/cdo-imex/config.cfg")
DAEMON = ("nvidia-imex", "-c", str(CONFIG))
# A stand-in daemon: a process that waits, with "-c <config>" on its command line.
STAND_IN = [sys.executable, "-c", "import time; time.sleep(30)", "-c", str(CONFIG)]


def facts(
    *, state: str = "S", start_time: int | None = 500, argv: tuple[str, ...] = DAEMON
) -> ProcessFacts:
    return ProcessFacts(pid=42, state=state, start_time=start_time, argv=argv)


RECORDED = ProcessIdentity(pid=42, start_time=500)


@pytest.mark.parametrize(
    ("process", "seen", "expected"),
    [
        pytest.param(RECORDED, facts(), None, id="the-recorded-daemon"),
        pytest.param(
            RECORDED,
            facts(argv=("python", "-m", "sim.imex.daemon", "--hosts-file", "h", *DAEMON[1:])),
            None,
            id="a-stand-in-with-the-same-config",
        ),
        pytest.param(RECORDED, None, "no process 42 runs", id="gone"),
        pytest.param(RECORDED, facts(state="Z"), "process 42 has exited", id="a-zombie"),
        pytest.param(
            RECORDED,
            facts(start_time=900),
            "the pid now belongs to another process",
            id="pid-reused",
        ),
        pytest.param(
            ProcessIdentity(pid=42),
            facts(),
            "the pid now belongs to another process",
            id="no-start-time-recorded",
        ),
        pytest.param(
            RECORDED,
            facts(argv=("sleep", "60")),
            "is not an IMEX daemon of /var/run/cdo-imex/config.cfg",
            id="another-program",
        ),
        pytest.param(
            RECORDED,
            facts(argv=("nvidia-imex", "-c", "/etc/nvidia-imex/config.cfg")),
            "is not an IMEX daemon of",
            id="a-daemon-of-another-config",
        ),
        pytest.param(
            ProcessIdentity(instance="abc"),
            None,
            "the record names no process id",
            id="an-in-process-daemon's-record",
        ),
    ],
)
def test_identify(
    process: ProcessIdentity, seen: ProcessFacts | None, expected: str | None
) -> None:
    reason = identify(process, seen, config=CONFIG)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_read_process_sees_the_command_line_and_start_time() -> None:
    own = read_process(os.getpid())
    assert own is not None
    assert own.argv and Path(own.argv[0]).name.startswith("python")
    assert own.start_time is not None and own.state != "Z"
    assert read_process(2**22 + 17) is None  # above pid_max: never a process


def test_the_record_round_trips_and_a_broken_one_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-imex.pid"
    record = DaemonRecord(process=RECORDED, clique="c.1", slot=3, config_digest="a", map_digest="b")
    write_record(path, record)
    assert read_record(path) == record
    path.write_text("{not json")
    assert read_record(path) is None
    assert read_record(tmp_path / "missing") is None
    # The previous release wrote {"pid": N, "start_time": T}: not a record to adopt from.
    path.write_bytes(msgspec.json.encode({"pid": 42, "start_time": 500}))
    assert read_record(path) is None


async def test_a_spawned_daemon_runs_in_its_own_session_and_its_exit_code_is_known(
    tmp_path: Path,
) -> None:
    daemon = spawn(STAND_IN, output=tmp_path / "out")
    assert daemon.pid is not None
    assert os.getsid(daemon.pid) == daemon.pid, "a session of its own"
    assert daemon.identity.start_time == read_process(daemon.pid).start_time  # type: ignore[union-attr]
    waiter = asyncio.create_task(daemon.wait())
    assert await daemon.stop(timeout_s=5) == -signal.SIGTERM
    assert await waiter == -signal.SIGTERM, "every waiter learns the exit"
    assert read_process(daemon.pid) is None, "reaped"


def test_signal_masks_of_proc_status() -> None:
    # SIGUSR1 is signal 10: bit 9 (0x200).
    assert signal_in_masks("Name:\tx\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000200\n", 10)
    assert signal_in_masks("SigIgn:\t0000000000000200\nSigCgt:\t0000000000000000\n", 10)
    assert not signal_in_masks("SigIgn:\t0000000000001000\nSigCgt:\t0000000000004002\n", 10)
    assert not signal_in_masks("Name:\tx\n", 10)


async def test_a_spawned_daemon_takes_sigusr1_only_once_it_handles_it(tmp_path: Path) -> None:
    ready = tmp_path / "handler-installed"
    program = (
        "import signal, sys, time, pathlib\n"
        "pathlib.Path(sys.argv[1]).with_suffix('.started').touch()\n"
        "while not pathlib.Path(sys.argv[1] + '.go').exists(): time.sleep(0.01)\n"
        "signal.signal(signal.SIGUSR1, lambda *_: None)\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "time.sleep(30)\n"
    )
    daemon = spawn([sys.executable, "-c", program, str(ready)], output=tmp_path / "out")
    try:
        await wait_for(lambda: ready.with_suffix(".started").exists(), timeout=10, what="start")
        assert daemon.pid is not None
        assert not daemon.takes_reload(), "no handler yet: SIGUSR1 would end it"
        await asyncio.to_thread(Path(f"{ready}.go").touch)
        await wait_for(ready.exists, timeout=10, what="its SIGUSR1 handler")
        assert daemon.takes_reload()
        assert catches_signal(daemon.pid, signal.SIGUSR1)
    finally:
        await daemon.stop(timeout_s=5)
    assert not daemon.takes_reload(), "a daemon that has exited takes nothing"


def test_a_program_that_cannot_run_is_a_start_error(tmp_path: Path) -> None:
    with pytest.raises(ImexStartError, match="no-such-imex-program"):
        spawn(["no-such-imex-program", "-c", "x"], output=tmp_path / "out")


def running_its_program(pid: int | None) -> bool | None:
    # posix_spawn returns once the child has begun exec, before the kernel has set the new
    # program's arguments: until then /proc shows an empty command line. An agent adopts a
    # daemon that has long been running, never one that is still being exec'd.
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return True if argv[-2:-1] == [str(CONFIG).encode()] else None


async def test_a_recorded_daemon_is_adopted_and_a_reused_pid_is_not(tmp_path: Path) -> None:
    daemon = spawn(STAND_IN, output=tmp_path / "out")
    try:
        await wait_for(lambda: running_its_program(daemon.pid), what="the stand-in's exec")
        record = DaemonRecord(process=daemon.identity)
        adopted = adopt_process(record, config=CONFIG)
        assert adopted.pid == daemon.pid
        adopted.release()
        earlier = (daemon.identity.start_time or 0) - 1
        stale = DaemonRecord(process=ProcessIdentity(pid=daemon.pid, start_time=earlier))
        with pytest.raises(NotAdoptableError, match="belongs to another process"):
            adopt_process(stale, config=CONFIG)
        with pytest.raises(NotAdoptableError, match="is not an IMEX daemon of"):
            adopt_process(record, config=Path("/elsewhere/config.cfg"))
    finally:
        await daemon.stop(timeout_s=5)
    with pytest.raises(NotAdoptableError, match="no process"):
        adopt_process(record, config=CONFIG)


async def test_a_daemon_that_is_not_our_child_is_watched_and_stopped(tmp_path: Path) -> None:
    # The shell starts sleep and exits: sleep is nobody's child here, like an adopted daemon.
    shell = await asyncio.create_subprocess_exec(
        "sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!", stdout=subprocess.PIPE
    )
    out, _ = await shell.communicate()
    pid = int(out)
    stranger = PidProcess.open(pid)
    assert await stranger.stop(timeout_s=5) is None, "its exit code is its parent's to know"
    assert stranger.exited
    with pytest.raises(ProcessLookupError):
        PidProcess.open(2**22 + 17)


@pytest.mark.parametrize(
    ("config", "output", "refused"),
    [
        ("/run/imex/config.cfg", "/run/imex/nvidia-imex.out", None),
        ("/etc/passwd", "/run/imex/nvidia-imex.out", "not in the launcher's directory"),
        ("/run/imex/../x/config.cfg", "/run/imex/o", "without '..'"),
        ("config.cfg", "/run/imex/o", "not an absolute path"),
        ("/run/imex/config.cfg", "/tmp/out", "not in the launcher's directory"),
    ],
)
def test_the_launcher_starts_daemons_of_its_directory_only(
    config: str, output: str, refused: str | None
) -> None:
    reason = request_refusal(
        LaunchRequest(config=config, output=output), config_dir=Path("/run/imex")
    )
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason
