"""``cdo ui`` as a user starts it: a separate process on a free port, its URL read from the line
it prints, stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for_sync

_URL = re.compile(r"^cdo ui: (http://\S+)")


class UiServer:
    def __init__(self, process: ProgramProcess, url: str) -> None:
        self.process = process
        self.url = url

    def get(self, path: str) -> tuple[int, Any]:
        """GET ``path``: the status and the JSON body (errors included)."""
        try:
            with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def state(self) -> dict[str, Any]:
        status, body = self.get("api/state")
        assert status == 200
        result: dict[str, Any] = body
        return result


@contextlib.contextmanager
def running_ui(*args: str, workdir: Path, env: dict[str, str] | None = None) -> Iterator[UiServer]:
    """``cdo ui --port 0 ARGS`` until the block ends."""
    process = ProgramProcess(
        "cli", "ui", "--port", "0", *args, env=env or {}, workdir=workdir, name="cdo-ui"
    ).start()
    try:

        def listening() -> str | None:
            if process.returncode is not None:
                raise AssertionError(
                    f"cdo ui exited with {process.returncode}: {process.stderr_text()}"
                )
            for line in process.stdout_lines():
                if found := _URL.match(line):
                    return found.group(1)
            return None

        url = wait_for_sync(listening, timeout=30, what="cdo ui listening")
        yield UiServer(process, url)
    finally:
        process.stop()
