"""cdo's ComputeDomain conversion webhook, served over HTTPS for tests that run no allocator.

On a cluster the clique allocator serves ``POST /convert``; a test that writes or reads
ComputeDomains as ``v1beta1`` without an allocator serves the same decision
(:mod:`services.clique_allocator.webhook.conversion`) from here, and installs the CRD pointing
at it::

    async with conversion_webhook() as webhook:
        await install_crds(client, webhook.crds())
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from services.clique_allocator.webhook.conversion import respond
from shared.crds.definitions import compute_domain_crd, conversion, placement_crd
from shared.crds.names import CONVERSION_PATH
from sim.kubeapi.admission.certificates import CertificateAuthority


@dataclass(frozen=True)
class ConversionWebhook:
    url: str
    """``https://127.0.0.1:<port>`` (the CRD's clientConfig adds the path)."""
    ca_pem: bytes

    def crds(self) -> list[dict[str, Any]]:
        """cdo's CRDs, the ComputeDomain one converted by this webhook."""
        webhook = conversion(url=self.url, ca_bundle=self.ca_pem)
        return [compute_domain_crd(webhook=webhook), placement_crd()]


async def _convert(request: web.Request) -> web.Response:
    status, body, _ = respond(await request.read())
    kind = "application/json" if status == 200 else "text/plain"
    return web.Response(status=status, body=body, content_type=kind)


@contextlib.asynccontextmanager
async def conversion_webhook() -> AsyncIterator[ConversionWebhook]:
    ca = CertificateAuthority("cdo-test-conversion-ca")
    pair = ca.issue(["127.0.0.1"])
    app = web.Application()
    app.router.add_post(CONVERSION_PATH, _convert)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pair.server_context())
        await site.start()
        yield ConversionWebhook(
            url=f"https://127.0.0.1:{runner.addresses[0][1]}", ca_pem=ca.cert_pem
        )
    finally:
        await runner.cleanup()
