"""The real kubectl (installed beside this Python by the dev dependencies), run for a test."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

KUBECTL = Path(sys.executable).parent / "kubectl"


async def kubectl(kubeconfig: Path, *args: str, limit_s: float = 60) -> tuple[int, str, str]:
    """Run ``kubectl --kubeconfig <kubeconfig> <args>``: (exit code, stdout, stderr)."""

    def run() -> tuple[int, str, str]:
        done = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=limit_s,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    return await asyncio.to_thread(run)
