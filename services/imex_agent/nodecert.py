"""This node's own IMEX key and certificate: made here, requested from the cdo signer, renewed.

With ``CDO_IMEX_AGENT_IMEX_CERT_SIGNER`` set (the imex-tls component), the agent:

- makes an ECDSA P-256 key on the node; it is written only to ``<config_dir>/tls/tls.key``
  (mode 0600, beside the daemon's other files) and never sent anywhere;
- asks for a certificate with a ``certificates.k8s.io/v1`` CertificateSigningRequest for that
  signer: subject ``CN=<node>``, DNS names ``<node>`` and the IMEX name, usages digital
  signature, server and client auth (:mod:`shared.imexcert`), authenticated by its pod-bound
  token, which names the node; the signer approves it only for the requester's own node;
- writes the issued certificate to ``tls.crt`` (key and certificate replaced together), and
  renews at two thirds of its lifetime with a new key, telling the daemon to reload
  (``on_renewed``: SIGUSR1 within IMEX's reload window);
- on a denial logs the reason the signer gave (``Denied`` condition) and asks again after a
  backoff (up to ``MAX_RETRY_S``): a revoked node keeps asking and keeps being refused.

The daemon is started only once a certificate is there (:meth:`NodeCertificates.ready`).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shared import imexcert
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import CERTIFICATE_SIGNING_REQUESTS as CSRS

log = logging.getLogger("cdo.imex_agent.nodecert")

KEY_FILE = "tls.key"
CERT_FILE = "tls.crt"
POLL_S = 0.5
"""How often a pending request is looked at."""
PENDING_LIMIT_S = 300.0
"""A request not answered within this is abandoned and a new one made."""
MIN_RETRY_S = 1.0
MAX_RETRY_S = 300.0


class RequestDeniedError(Exception):
    """The signer denied (or failed) the request; the message is its reason and message."""


def build_request(node: str, key: ec.EllipticCurvePrivateKey) -> bytes:
    """The PEM certificate request for ``node``'s IMEX certificate."""
    names = [x509.DNSName(node), x509.DNSName(imexcert.IMEX_NAME)]
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node)]))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM)


def renewal_due(cert_pem: bytes) -> dt.datetime:
    """When a certificate should be renewed: two thirds into its lifetime."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * 2 / 3


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """``key`` as the agent writes it to ``tls.key``: unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class _Csr(msgspec.Struct, frozen=True):
    status: dict[str, Any] = msgspec.field(default_factory=dict)


_decode = msgspec.json.Decoder(_Csr)


class NodeCertificates:
    """See the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node: str,
        directory: Path,
        signer: str,
        on_renewed: Callable[[], None],
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._client = client
        self._node = node
        self._directory = directory
        self._signer = signer
        self._on_renewed = on_renewed
        self._now = now
        self.denials = 0
        """Requests the signer denied."""
        self.last_denial = ""

    @property
    def key_file(self) -> Path:
        return self._directory / KEY_FILE

    @property
    def cert_file(self) -> Path:
        return self._directory / CERT_FILE

    def ready(self) -> bool:
        """A key and a certificate are on disk (the daemon may start)."""
        return self.key_file.exists() and self.cert_file.exists()

    async def run(self) -> None:
        retry_s = MIN_RETRY_S
        while True:
            wait = self._seconds_until_due()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            try:
                await self._renew()
            except (RequestDeniedError, KubeApiError, TimeoutError) as exc:
                log.error(
                    "cannot obtain this node's IMEX certificate",
                    extra={"node": self._node, "error": str(exc), "retry_s": retry_s},
                )
                await asyncio.sleep(retry_s)
                retry_s = min(MAX_RETRY_S, retry_s * 2)
                continue
            retry_s = MIN_RETRY_S

    def _seconds_until_due(self) -> float:
        if not self.ready():
            return 0.0
        try:
            due = renewal_due(self.cert_file.read_bytes())
        except ValueError:
            return 0.0
        return max(0.0, (due - self._now()).total_seconds())

    async def _renew(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        request = build_request(self._node, key)
        digest = hashlib.sha256(request).hexdigest()
        name = imexcert.request_name(self._node, digest)
        body = {
            "apiVersion": CSRS.api_version,
            "kind": CSRS.kind,
            "metadata": {"name": name, "labels": {imexcert.NODE_LABEL: self._node}},
            "spec": {
                "request": base64.b64encode(request).decode(),
                "signerName": self._signer,
                "usages": list(imexcert.USAGES),
            },
        }
        await self._client.create(CSRS, body)
        log.info("requested this node's IMEX certificate", extra={"csr": name})
        cert = await self._issued(name)
        self._install(key_pem(key), cert)
        log.info("installed this node's IMEX certificate", extra={"csr": name})
        self._on_renewed()

    async def _issued(self, name: str) -> bytes:
        async with asyncio.timeout(PENDING_LIMIT_S):
            while True:
                status = _decode.decode(await self._client.get(CSRS, name)).status
                for condition in status.get("conditions") or ():
                    if condition.get("type") in ("Denied", "Failed"):
                        self.denials += 1
                        self.last_denial = (
                            f"{condition.get('reason', '')}: {condition.get('message', '')}"
                        )
                        raise RequestDeniedError(
                            f"request {name} {condition['type']}: {self.last_denial}"
                        )
                certificate = status.get("certificate")
                if certificate:
                    return base64.b64decode(certificate)
                await asyncio.sleep(POLL_S)

    def _install(self, key_text: bytes, cert_pem: bytes) -> None:
        """Replace key and certificate; each file is swapped whole (rename)."""
        self._directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        key_tmp = self.key_file.with_suffix(".key.new")
        cert_tmp = self.cert_file.with_suffix(".crt.new")
        fd = os.open(key_tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key_text)
        cert_tmp.write_bytes(cert_pem)
        os.replace(key_tmp, self.key_file)
        os.replace(cert_tmp, self.cert_file)
