"""Running the ``cdo`` command as a user does: a separate process, its exit code and output.

``python -m cli`` is what the ``cdo`` console script runs. The environment is the test's
minus the variables that would point the command elsewhere (KUBECONFIG, CDO_NATS_URL,
CDO_SIM_STATE_DIR), so each test says where the cluster and NATS are.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

HIDDEN = ("KUBECONFIG", "CDO_NATS_URL", "CDO_SIM_STATE_DIR")


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in HIDDEN}
    return {**env, **(extra or {})}


def cdo(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> Result:
    """Run ``cdo ARGS`` and wait for it (blocking: only for tests without in-process servers)."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(env),
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


async def acdo(*args: str, env: dict[str, str] | None = None, limit_s: float = 60) -> Result:
    """Run ``cdo ARGS`` without blocking the event loop (the emulator may be serving in it)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(env),
    )
    try:
        async with asyncio.timeout(limit_s):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


def dead_kubeconfig(path: Path, port: int) -> Path:
    """A kubeconfig naming an API server on a port where nothing listens."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "gone", "user": {"token": "x"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
                "current-context": "gone",
            }
        )
    )
    return path
