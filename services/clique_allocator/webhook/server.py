"""The HTTPS server of the pod webhook, the channel allocation webhook and the ComputeDomain
conversion webhook, run by every replica, leader or not.

It answers ``POST /mutate-pods`` with an AdmissionReview and never refuses a pod. Until the
caches it reads have synced, and when the API cannot say whether a template is a domain's, it
lets the pod through unchanged with a warning (counted ``undecided``): a pod of no domain is
then admitted, and the ``cdo-pod-gate`` admission policy refuses a domain's pod without its
gate, so the pod's workload controller creates it again until the webhook gates it. A replica
whose caches have not synced is not ready either, so its Service sends it nothing on a real
cluster. It answers ``POST /convert`` with a ConversionReview (:mod:`.conversion`), from the
request alone, caches synced or not. The serving certificate comes from files (a mounted TLS
Secret) and is read again when they change, so a renewed certificate is used without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from services.clique_allocator.metrics import AllocatorMetrics
from services.clique_allocator.settings import WebhookSettings
from services.clique_allocator.webhook.admission import (
    AdmissionRequest,
    ReviewError,
    claim_templates,
    decode_pod,
    decode_review,
    gate_patch,
    review_response,
)
from services.clique_allocator.webhook.allocation_review import AllocationReview
from services.clique_allocator.webhook.configuration import ALLOCATION_PATH, WEBHOOK_PATH
from services.clique_allocator.webhook.conversion import respond
from services.clique_allocator.webhook.templates import LookupFailedError, TemplateClassifier
from shared.crds.names import CONVERSION_PATH

log = logging.getLogger("cdo.clique_allocator.webhook")

WEBHOOK = "pod-gate"
_JSON = "application/json"


class CertificateFiles:
    """An SSL context serving the certificate in two PEM files, reloaded when they change."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self._cert = Path(cert_file)
        self._key = Path(key_file)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._stamp = self._read_stamp()
        self.context.load_cert_chain(self._cert, self._key)
        self.loads = 1

    def _read_stamp(self) -> tuple[float, float, int, int]:
        cert, key = self._cert.stat(), self._key.stat()
        return (cert.st_mtime, key.st_mtime, cert.st_size, key.st_size)

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; a half-written pair is tried again later."""
        try:
            stamp = self._read_stamp()
            if stamp == self._stamp:
                return False
            self.context.load_cert_chain(self._cert, self._key)
        except (OSError, ssl.SSLError) as exc:
            log.warning("could not reload the webhook certificate", extra={"error": str(exc)})
            return False
        self._stamp = stamp
        self.loads += 1
        log.info("webhook certificate reloaded", extra={"cert_file": str(self._cert)})
        return True


class WebhookServer:
    """Serves the pod webhook until cancelled."""

    def __init__(
        self,
        *,
        settings: WebhookSettings,
        classifier: TemplateClassifier,
        synced: Callable[[], bool],
        metrics: AllocatorMetrics,
        allocations: AllocationReview | None = None,
    ) -> None:
        self._settings = settings
        self._classifier = classifier
        self._synced = synced
        self._metrics = metrics
        self._allocations = allocations
        self.bound_port = 0
        self.serving = False

    def _count(self, result: str) -> None:
        self._metrics.admissions.labels(WEBHOOK, result).inc()

    async def handle(self, request: web.Request) -> web.Response:
        with self._metrics.admission_seconds.time():
            try:
                review = decode_review(await request.read())
            except ReviewError as exc:
                self._count("error")
                return web.Response(status=400, text=str(exc))
            return web.Response(body=await self.admit(review), content_type=_JSON)

    async def review_allocation(self, request: web.Request) -> web.Response:
        """``POST /validate-channel-allocations``: a write of a claim's status that holds one
        of cdo's attachment devices."""
        try:
            review = decode_review(await request.read())
        except ReviewError as exc:
            self._metrics.admissions.labels("channel-allocation", "error").inc()
            return web.Response(status=400, text=str(exc))
        if self._allocations is None:
            return web.Response(status=404, text="the channel allocation webhook is not served")
        return web.Response(body=self._allocations.answer(review), content_type=_JSON)

    async def convert(self, request: web.Request) -> web.Response:
        """``POST /convert``: a ConversionReview of ComputeDomains."""
        status, body, result = respond(await request.read())
        self._metrics.conversions.labels(result).inc()
        if status != 200:
            return web.Response(status=status, body=body, content_type="text/plain")
        return web.Response(body=body, content_type=_JSON)

    async def admit(self, review: AdmissionRequest) -> bytes:
        """The answer to one admission request."""
        uid = review.uid
        pod = decode_pod(review)
        if review.operation != "CREATE" or pod is None or not claim_templates(pod):
            self._count("passed")
            return review_response(uid)
        if not self._synced():
            self._count("undecided")
            return review_response(
                uid, warning="the clique allocator has not synced its caches yet: not gated"
            )
        namespace = review.namespace or pod.metadata.namespace
        try:
            owned = await self._classifier.domain_templates(namespace, claim_templates(pod))
        except LookupFailedError as exc:
            self._count("undecided")
            return review_response(uid, warning=f"{exc}: not gated")
        patch = gate_patch(pod, domain_templates=owned)
        self._count("gated" if patch else "passed")
        return review_response(uid, patch=patch)

    async def run(self) -> None:
        """Serve until cancelled."""
        certificate = CertificateFiles(self._settings.cert_file, self._settings.key_file)
        app = web.Application()
        app.router.add_post(WEBHOOK_PATH, self.handle)
        app.router.add_post(ALLOCATION_PATH, self.review_allocation)
        app.router.add_post(CONVERSION_PATH, self.convert)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(
                runner,
                self._settings.host,
                self._settings.port,
                ssl_context=certificate.context,
            )
            await site.start()
            addresses = runner.addresses
            self.bound_port = int(addresses[0][1]) if addresses else self._settings.port
            self.serving = True
            log.info(
                "webhook serving",
                extra={
                    "port": self.bound_port,
                    "paths": [WEBHOOK_PATH, ALLOCATION_PATH, CONVERSION_PATH],
                },
            )
            while True:
                if self._settings.reload_s > 0:
                    await asyncio.sleep(self._settings.reload_s)
                    certificate.reload_if_changed()
                else:
                    await asyncio.Event().wait()
        finally:
            self.serving = False
            await runner.cleanup()
