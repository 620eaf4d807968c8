"""Running the emulator: in-process (``serve``), in a background thread (``ServerThread``)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from sim.kubeapi.admission.certificates import CertificateAuthority
from sim.kubeapi.config import ServerConfig
from sim.kubeapi.hosting.kubeconfig import write_kubeconfig
from sim.kubeapi.http.app import ApiServer
from sim.kubeapi.http.faults import Faults
from sim.kubeapi.storage.datadir import CA_CERT, CA_KEY, DataDir
from sim.kubeapi.storage.store import Store

T = TypeVar("T")


@dataclass(frozen=True)
class KubeServer:
    """A running emulator: where to reach it and handles for tests.

    ``url``: base URL (``http://127.0.0.1:<port>``); ``kubeconfig``: path of the kubeconfig
    written for it; ``store``: the object store (``store.compact()`` forgets history,
    ``store.rv`` is the current resourceVersion); ``faults``: fault injection; ``api``: the
    whole server (registry, engine) for white-box checks; ``ca_pem``: the CA of its serving
    certificate when it serves HTTPS (with ``enforce_auth``), else None.
    """

    url: str
    kubeconfig: Path
    api: ApiServer
    ca_pem: bytes | None = None

    def client_ssl(self) -> ssl.SSLContext | bool:
        """What an HTTP client passes as ``ssl`` to reach this server."""
        if self.ca_pem is None:
            return False
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    @property
    def store(self) -> Store:
        return self.api.store

    @property
    def faults(self) -> Faults:
        return self.api.faults

    def compact(self, rv: int | None = None) -> int:
        """Forget watch history up to ``rv`` (default: now); returns the rv used."""
        return self.api.store.compact(rv)


@contextlib.asynccontextmanager
async def serve(
    *,
    config: ServerConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    kubeconfig: str | Path | None = None,
) -> AsyncIterator[KubeServer]:
    """Serve the emulator on ``host:port`` (port 0: a free one) for the ``async with`` body.

    The kubeconfig is written to ``kubeconfig`` or, when omitted, into a temporary
    directory removed on exit. With ``enforce_auth`` (or ``tls``) the server speaks HTTPS with a
    certificate from a throwaway CA that the kubeconfig trusts, since clients send tokens
    only over TLS.
    """
    api = ApiServer(config)
    await api.seed()
    runner = web.AppRunner(api.app(), access_log=None, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    ca_pem, serving = None, None
    if api.config.serves_tls:
        ca = _serving_ca(api.data_dir)
        ca_pem, serving = ca.cert_pem, ca.issue([host, "localhost"]).server_context()
    site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=serving)
    await site.start()
    bound = runner.addresses[0][1]
    url = f"{'https' if serving else 'http'}://{host}:{bound}"
    controllers = asyncio.create_task(api.controllers.run(), name="kubeapi-controllers")
    record = None
    if api.config.access_record:
        if api.data_dir is not None:
            api.access.resume_record(Path(api.config.access_record))
        record = asyncio.create_task(
            api.access.keep_record(Path(api.config.access_record)), name="kubeapi-access-record"
        )
    with contextlib.ExitStack() as stack:
        if kubeconfig is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="kubeapi-"))
            kubeconfig = Path(directory) / "kubeconfig"
        path = write_kubeconfig(kubeconfig, url, ca_pem=ca_pem)
        try:
            yield KubeServer(url=url, kubeconfig=path, api=api, ca_pem=ca_pem)
        finally:
            for task in (controllers, record):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await runner.cleanup()
            await api.engine.webhooks.close()
            if api.data_dir is not None:
                api.data_dir.journal.close()


def _serving_ca(data_dir: DataDir | None) -> CertificateAuthority:
    """The CA of the serving certificate: a new one, or the one the data directory keeps."""
    if data_dir is None:
        return CertificateAuthority("cdo-sim-apiserver-ca")
    cert, key = data_dir.read(CA_CERT), data_dir.read(CA_KEY)
    if cert is not None and key is not None:
        return CertificateAuthority.from_pem(cert, key)
    ca = CertificateAuthority("cdo-sim-apiserver-ca")
    data_dir.keep(CA_KEY, ca.key_pem)
    data_dir.keep(CA_CERT, ca.cert_pem)
    return ca


class ServerThread:
    """The emulator on its own event loop in a daemon thread, for synchronous code.

    Use as a context manager; ``url``/``kubeconfig``/``faults`` are ready inside. ``call``
    runs a function on the server's loop (the store is not thread-safe), e.g.
    ``srv.call(lambda api: api.store.compact())``.
    """

    def __init__(
        self,
        *,
        config: ServerConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        kubeconfig: str | Path | None = None,
    ) -> None:
        self._config = config
        self._host = host
        self._port = port
        self._kubeconfig = kubeconfig
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready: Future[KubeServer] = Future()
        self._stop: asyncio.Event | None = None
        self.server: KubeServer | None = None

    def __enter__(self) -> ServerThread:
        self._thread = threading.Thread(target=self._run, name="kubeapi-server", daemon=True)
        self._thread.start()
        self.server = self._ready.result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with serve(
                config=self._config, host=self._host, port=self._port, kubeconfig=self._kubeconfig
            ) as server:
                self._ready.set_result(server)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def kubeconfig(self) -> Path:
        assert self.server is not None
        return self.server.kubeconfig

    @property
    def faults(self) -> Faults:
        assert self.server is not None
        return self.server.faults

    def call(self, fn: Callable[[ApiServer], T]) -> T:
        """Run ``fn(api)`` on the server's event loop and return its result."""
        assert self._loop is not None and self.server is not None
        api = self.server.api

        async def invoke() -> T:
            return fn(api)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout=30)

    def run(self, coro_fn: Callable[[ApiServer], Coroutine[Any, Any, T]]) -> T:
        """Await ``coro_fn(api)`` on the server's loop and return its result."""
        assert self._loop is not None and self.server is not None
        return asyncio.run_coroutine_threadsafe(coro_fn(self.server.api), self._loop).result(
            timeout=30
        )

    def compact(self, rv: int | None = None) -> int:
        return self.call(lambda api: api.store.compact(rv))
