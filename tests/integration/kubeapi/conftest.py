"""Fixtures for driving the API emulator over HTTP; reusable by any integration test.

- ``kube``: an emulator served in-process on a free port (``KubeServer``: ``url``,
  ``kubeconfig``, ``store``, ``faults``, ``compact()``);
- ``api_client``: a kubernetes-asyncio ``ApiClient`` configured from its kubeconfig;
- ``http``: a raw aiohttp session plus helpers, for asserting exact wire shapes (``watch_stream``
  keeps a watch open and reads it one event at a time);
- ``kubectl``: runs the real kubectl binary against it and returns (rc, stdout, stderr);
- ``kube_thread``: the emulator in a background thread, for the synchronous client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config

from sim.kubeapi import KubeServer, ServerConfig, ServerThread, serve

KUBECTL = Path(sys.executable).parent / "kubectl"


@pytest.fixture
def kube_config() -> ServerConfig:
    """Override in a test module to change server settings."""
    return ServerConfig(bookmark_interval_s=0.2)


def with_beta_apis() -> ServerConfig:
    """The default settings with DRA's beta versions served too (v1beta1, v1beta2), as
    kube-apiserver's ``--runtime-config=api/beta=true`` does."""
    return ServerConfig(bookmark_interval_s=0.2, runtime_config={"api/beta": True})


@pytest.fixture
async def kube(kube_config: ServerConfig, tmp_path: Path) -> AsyncIterator[KubeServer]:
    async with serve(config=kube_config, kubeconfig=tmp_path / "kubeconfig") as server:
        yield server


@pytest.fixture
async def api_client(kube: KubeServer) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(kube.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration=configuration) as api:
        yield api


@dataclass
class Http:
    """Raw HTTP against the emulator: ``(status, decoded JSON body, headers)``."""

    session: aiohttp.ClientSession
    base: str

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any, Any]:
        async with self.session.request(
            method, self.base + path, json=json, data=data, headers=headers, params=params
        ) as resp:
            raw = await resp.read()
            try:
                body = await resp.json(content_type=None) if raw else None
            except ValueError:
                body = raw.decode()
            return resp.status, body, resp.headers

    async def get(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("POST", path, json=body, **kw)

    async def put(self, path: str, body: Any, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("PUT", path, json=body, **kw)

    async def patch(
        self, path: str, body: Any, content_type: str, **kw: Any
    ) -> tuple[int, Any, Any]:
        import json as _json

        data = body if isinstance(body, str | bytes) else _json.dumps(body)
        headers = {"Content-Type": content_type, **kw.pop("headers", {})}
        return await self.request("PATCH", path, data=data, headers=headers, **kw)

    async def delete(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("DELETE", path, json=body, **kw)

    async def watch_lines(
        self, path: str, *, params: dict[str, str], count: int, deadline_s: float = 10.0
    ) -> list[dict[str, Any]]:
        """Read up to ``count`` watch events (fewer if the stream ends first)."""
        import json as _json

        out: list[dict[str, Any]] = []
        async with self.session.get(
            self.base + path, params=params, timeout=aiohttp.ClientTimeout(total=deadline_s)
        ) as resp:
            assert resp.status == 200, await resp.text()
            while len(out) < count:
                line = await resp.content.readline()
                if not line:
                    break
                out.append(_json.loads(line))
        return out

    @contextlib.asynccontextmanager
    async def watch_stream(
        self, path: str, *, params: dict[str, str], deadline_s: float = 10.0
    ) -> AsyncIterator[WatchEvents]:
        """An open watch, read one event at a time while the test acts between reads."""
        async with self.session.get(
            self.base + path, params=params, timeout=aiohttp.ClientTimeout(total=deadline_s)
        ) as resp:
            assert resp.status == 200, await resp.text()
            yield WatchEvents(resp, deadline_s)


@dataclass
class WatchEvents:
    """The events of one open watch response, each read with a bounded wait.

    Having read an event proves the server is following the watch, so a test that waits for
    one before it acts knows that what it causes next arrives as a live event.
    """

    response: aiohttp.ClientResponse
    deadline_s: float

    async def next(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.response.content.readline(), self.deadline_s)
        assert line, "the watch stream ended before the next event"
        event: dict[str, Any] = json.loads(line)
        return event

    async def rest(self) -> bytes:
        """Everything the stream still sends until it ends."""
        return await asyncio.wait_for(self.response.content.read(), self.deadline_s)


@pytest.fixture
async def http(kube: KubeServer) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(session, kube.url)


@dataclass
class Kubectl:
    kubeconfig: Path
    cache_dir: Path

    async def __call__(
        self, *args: str, stdin: str | None = None, deadline_s: float = 60.0
    ) -> tuple[int, str, str]:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), HOME=str(self.cache_dir.parent))
        proc = await asyncio.create_subprocess_exec(
            str(KUBECTL),
            "--cache-dir",
            str(self.cache_dir),
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), deadline_s
        )
        return proc.returncode or 0, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: str | None = None, deadline_s: float = 60.0) -> str:
        rc, out, err = await self(*args, stdin=stdin, deadline_s=deadline_s)
        assert rc == 0, f"kubectl {' '.join(args)} failed ({rc}): {err}\n{out}"
        return out


@pytest.fixture
def kubectl(kube: KubeServer, tmp_path: Path) -> Kubectl:
    return Kubectl(kube.kubeconfig, tmp_path / "kubectl-cache")


@pytest.fixture
def kube_thread(tmp_path: Path) -> Iterator[ServerThread]:
    with ServerThread(
        config=ServerConfig(bookmark_interval_s=0.2), kubeconfig=tmp_path / "kubeconfig"
    ) as server:
        yield server


@pytest.fixture
async def widget_crd(http: Http) -> None:
    """The example Widget CRD (tests/integration/kubeapi/crds.py), installed and served."""
    from .crds import WIDGET_CRD

    status, body, _ = await http.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGET_CRD
    )
    assert status == 201, body
