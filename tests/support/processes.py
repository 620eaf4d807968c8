"""Real subprocesses for tests: a cdo program started with ``python -m``, its output in files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.wait import wait_for_sync


class ProgramProcess:
    """One ``python -m <module>`` subprocess with stdout and stderr captured to files."""

    def __init__(
        self, module: str, *args: str, env: dict[str, str], workdir: Path, name: str = ""
    ) -> None:
        self.module = module
        self.args = args
        self.env = env
        self.name = name or module.rsplit(".", 1)[-1]
        self.stdout_path = workdir / f"{self.name}.stdout"
        self.stderr_path = workdir / f"{self.name}.stderr"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> ProgramProcess:
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self._process = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                stdout=out,
                stderr=err,
                env={**os.environ, **self.env},
            )
        return self

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self._process is not None, "not started"
        return self._process

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def send(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 20.0) -> int:
        return self.process.wait(timeout)

    def stop(self) -> None:
        """End the process if it still runs (SIGTERM, then SIGKILL)."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def stdout_lines(self) -> list[str]:
        return self.stdout_path.read_text().splitlines()

    def stdout_json(self) -> list[dict[str, Any]]:
        """Every complete JSON line written to stdout so far."""
        records = []
        for line in self.stdout_lines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line still being written
        return records

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log records the program wrote to stderr."""
        records = []
        for line in self.stderr_path.read_text().splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    def stderr_text(self) -> str:
        return self.stderr_path.read_text()

    def wait_for_stdout(
        self, predicate: Any, *, timeout: float = 15.0, what: str = "output"
    ) -> list[dict[str, Any]]:
        """Wait until ``predicate(records)`` holds for the JSON lines on stdout."""

        def probe() -> list[dict[str, Any]] | None:
            if self.returncode is not None:
                raise AssertionError(
                    f"{self.name} exited with {self.returncode} while waiting for {what}:\n"
                    + self.stderr_text()[-3000:]
                )
            records = self.stdout_json()
            return records if predicate(records) else None

        return wait_for_sync(probe, timeout=timeout, what=what)
