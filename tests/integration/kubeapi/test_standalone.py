"""``python -m sim.kubeapi`` serves standalone and writes a kubeconfig kubectl can use."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import yaml

from .conftest import Kubectl


async def test_standalone_server_with_kubectl(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sim.kubeapi",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("serving http://127.0.0.1:")
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert line.split()[1] == server
        kubectl = Kubectl(kubeconfig, tmp_path / "cache")
        out = await kubectl.ok("get", "namespaces", "-o", "name")
        assert out.split() == [
            "namespace/default",
            "namespace/kube-node-lease",
            "namespace/kube-public",
            "namespace/kube-system",
        ]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    assert proc.returncode == 0
