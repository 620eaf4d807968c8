"""One HTTPS client for every webhook the server calls (admission and CRD conversion).

A webhook's ``clientConfig`` names either a ``url`` or a ``service`` (namespace, name, port,
path); only its ``caBundle`` is trusted. A service is reached at the address
``ServerConfig.webhook_service_hosts`` gives for ``"<namespace>/<name>"``, and its certificate
must name ``<name>.<namespace>.svc``, as kube-apiserver checks it; without an entry the
Service does not exist, and the call fails as kube-apiserver's service resolver fails it
(``service "<name>" not found``). Other failures read as Go's HTTP client words them:
``dial tcp <address>: connect: connection refused``, ``tls: failed to verify certificate:
x509: certificate signed by unknown authority``, ``context deadline exceeded``.
"""

from __future__ import annotations

import base64
import errno
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp

from sim.kubeapi.machinery import codec


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a call goes: ``url`` is connected to, ``shown`` is the URL errors name (the
    Service's DNS name for a service reference), ``server_name`` the name the certificate must
    carry (None: the URL's host)."""

    url: str
    shown: str
    server_name: str | None
    missing_service: str = ""
    """The name of a referenced Service that does not exist (no address for it)."""


class CallFailedError(Exception):
    """The call itself failed: unreachable, refused, timed out, a non-200 answer, or not JSON.

    ``str()`` is the client's error text, ``Post "<url>": <reason>``.
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f'Post "{url}": {reason}')
        self.url = url
        self.reason = reason


class WebhookClient:
    """Owns one aiohttp session and an SSL context per distinct caBundle."""

    def __init__(self, service_hosts: dict[str, str]) -> None:
        self.service_hosts = service_hosts
        self._session: aiohttp.ClientSession | None = None
        self._ssl_cache: dict[bytes, ssl.SSLContext] = {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _ssl(self, bundle: str | None) -> ssl.SSLContext:
        raw = base64.b64decode(bundle) if bundle else b""
        cached = self._ssl_cache.get(raw)
        if cached is None:
            cached = ssl.create_default_context()
            if raw:
                cached = ssl.create_default_context(cadata=raw.decode())
            self._ssl_cache[raw] = cached
        return cached

    def endpoint(self, client: dict[str, Any], *, query: str = "") -> Endpoint:
        """Where ``clientConfig`` points, with ``query`` (``"timeout=30s"``) appended."""
        suffix = f"?{query}" if query else ""
        url = client.get("url")
        if url:
            return Endpoint(url=f"{url}{suffix}", shown=f"{url}{suffix}", server_name=None)
        service = client.get("service") or {}
        ns, name = service.get("namespace", ""), service.get("name", "")
        port = service.get("port", 443)
        path = service.get("path") or "/"
        host = f"{name}.{ns}.svc"
        shown = f"https://{host}:{port}{path}{suffix}"
        address = self.service_hosts.get(f"{ns}/{name}")
        if address is None:
            return Endpoint(url=shown, shown=shown, server_name=host, missing_service=name)
        return Endpoint(url=f"https://{address}{path}{suffix}", shown=shown, server_name=host)

    async def post(
        self, client: dict[str, Any], endpoint: Endpoint, body: Any, *, timeout_s: float
    ) -> Any:
        """POST ``body`` as JSON and return the decoded JSON answer; CallFailedError else."""
        if endpoint.missing_service:
            raise CallFailedError(endpoint.shown, f'service "{endpoint.missing_service}" not found')
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(
                endpoint.url,
                data=codec.encode(body),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                ssl=self._ssl(client.get("caBundle")),
                server_hostname=endpoint.server_name,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise ValueError(f"the server responded with the status code {resp.status}")
            return codec.decode(raw)
        except TimeoutError:
            raise CallFailedError(endpoint.shown, "context deadline exceeded") from None
        except (aiohttp.ClientError, ValueError, OSError) as exc:
            raise CallFailedError(endpoint.shown, _reason(exc, endpoint.url)) from None


def _reason(exc: Exception, url: str) -> str:
    """The failure as Go's HTTP client states it, where it has a fixed form."""
    address = url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"dial tcp: lookup {address.rsplit(':', 1)[0]}: no such host"
    if isinstance(exc, aiohttp.ClientConnectorError) and exc.os_error.errno == errno.ECONNREFUSED:
        return f"dial tcp {address}: connect: connection refused"
    return str(exc)
