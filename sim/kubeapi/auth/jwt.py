"""Compact JWS (RFC 7515) tokens signed with ES256, the form ServiceAccount tokens take.

The key pair is made when the server starts, or read from its data directory when it has one
(kube-apiserver reads one from ``--service-account-key-file``), so that tokens outlive a
restart; ES256 is one of the algorithms the real server accepts and
its keys are cheap to make. ``verify`` answers the claims of a token this key signed, or
raises ``MalformedTokenError`` for anything else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

from sim.kubeapi.machinery import codec

COORDINATE_BYTES = 32


class MalformedTokenError(ValueError):
    """Not a JWT this server signed (bad shape, encoding, algorithm or signature)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise MalformedTokenError("bad base64url") from None


class Signer:
    """One ES256 key pair: signs claims, verifies tokens."""

    def __init__(self, key_pem: bytes | None = None) -> None:
        if key_pem is None:
            self._key = ec.generate_private_key(ec.SECP256R1())
        else:
            loaded = load_pem_private_key(key_pem, password=None)
            if not isinstance(loaded, ec.EllipticCurvePrivateKey):
                raise ValueError("the service account signing key is not an EC key")
            self._key = loaded
        self._public = self._key.public_key()
        der = self._public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        # The key id the real server derives from the public key (a hash of its DER form).
        self.key_id = _b64(hashlib.sha256(der).digest())
        self._header = _b64(codec.encode({"alg": "ES256", "kid": self.key_id}))

    @property
    def key_pem(self) -> bytes:
        return self._key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())

    def sign(self, claims: dict[str, Any]) -> str:
        signing_input = f"{self._header}.{_b64(codec.encode(claims))}"
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        raw = r.to_bytes(COORDINATE_BYTES, "big") + s.to_bytes(COORDINATE_BYTES, "big")
        return f"{signing_input}.{_b64(raw)}"

    def verify(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise MalformedTokenError("not a compact JWS")
        header, payload, signature = parts
        try:
            decoded_header = codec.decode(_unb64(header))
            claims = codec.decode(_unb64(payload))
        except codec.DecodeError:
            raise MalformedTokenError("bad JSON") from None
        if not isinstance(decoded_header, dict) or decoded_header.get("alg") != "ES256":
            raise MalformedTokenError("unexpected algorithm")
        raw = _unb64(signature)
        if len(raw) != 2 * COORDINATE_BYTES:
            raise MalformedTokenError("bad signature length")
        der = encode_dss_signature(
            int.from_bytes(raw[:COORDINATE_BYTES], "big"),
            int.from_bytes(raw[COORDINATE_BYTES:], "big"),
        )
        try:
            self._public.verify(der, f"{header}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise MalformedTokenError("bad signature") from None
        if not isinstance(claims, dict):
            raise MalformedTokenError("claims are not an object")
        return claims
