"""Issuing a node's IMEX certificate from an approved request, with the IMEX CA.

The certificate copies the request's subject and DNS names (the approval checked them), lasts
the signer's lifetime or the request's ``spec.expirationSeconds`` when shorter, starts a minute
in the past (clocks of nodes drift), and carries exactly the usages a peer needs: digital
signature, TLS server and client authentication. Short lifetimes are the revocation: a node
the signer refuses keeps its certificate only until it expires (docs/security.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from shared import imexcert

BACKDATE = dt.timedelta(minutes=1)


class MissingCaError(Exception):
    """The IMEX CA Secret is missing or incomplete; the message says what to create."""


class CertificateAuthority(msgspec.Struct, frozen=True, kw_only=True):
    cert_pem: bytes
    key_pem: bytes


def ca_from_secret(namespace: str, data: Mapping[str, bytes] | None) -> CertificateAuthority:
    """The CA of the Secret's decoded ``data`` (None: the Secret does not exist)."""
    where = f"Secret {imexcert.CA_SECRET} in namespace {namespace}"
    hint = (
        "create it with the cdo-bootstrap Job (CDO_BOOTSTRAP_IMEX_CA=true, the imex-tls "
        "component) or cert-manager (the cert-manager component), or with `kubectl -n "
        f"{namespace} create secret tls {imexcert.CA_SECRET} --cert=ca.crt --key=ca.key` "
        "for a CA of your own"
    )
    if data is None:
        raise MissingCaError(f"{where} does not exist: {hint}")
    missing = [key for key in ("tls.crt", "tls.key") if not data.get(key)]
    if missing:
        raise MissingCaError(f"{where} lacks {', '.join(missing)}: {hint}")
    return CertificateAuthority(cert_pem=data["tls.crt"], key_pem=data["tls.key"])


def issue(
    ca: CertificateAuthority,
    request_pem: bytes,
    *,
    lifetime: dt.timedelta,
    requested_s: int | None,
    now: dt.datetime,
) -> bytes:
    """The PEM certificate for an approved request."""
    csr = x509.load_pem_x509_csr(request_pem)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise MissingCaError(f"the key in Secret {imexcert.CA_SECRET} is not an EC or RSA key")
    if requested_s is not None:
        lifetime = min(lifetime, dt.timedelta(seconds=requested_s))
    sans = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(csr.subject)
        .issuer_name(ca_cert.subject)
        .public_key(csr.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM)
