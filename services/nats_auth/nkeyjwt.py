"""NATS JWTs: ed25519 nkeys, and tokens in the form nats-server reads and writes.

A NATS JWT is a compact JWS with the header ``{"typ":"JWT","alg":"ed25519-nkey"}``; the
signature is ed25519 over ``<header>.<payload>`` (both base64url without padding), made with
the nkey named in ``iss``. ``jti`` is the base32 (no padding) SHA-512/256 of the standard claims
without it, as the NATS JWT library computes it. Public nkeys are base32 of a prefix byte (its
role: ``N`` server, ``A`` account, ``U`` user ...), the 32-byte ed25519 key and a CRC-16.

    signer = Signer.from_seed(seed)          # an account seed, "SA..."
    token = encode({"sub": user, "nats": {...}}, signer, now=time.time())
    claims = decode(token, roles=(SERVER,))  # JwtError unless well formed and signed by iss
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from typing import Any

import msgspec
import nacl.exceptions
import nacl.signing
import nkeys

SERVER = "N"
ACCOUNT = "A"
USER = "U"
_PREFIXES = {
    SERVER: nkeys.PREFIX_BYTE_SERVER,
    ACCOUNT: nkeys.PREFIX_BYTE_ACCOUNT,
    USER: nkeys.PREFIX_BYTE_USER,
}
HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}
_STANDARD = ("aud", "exp", "jti", "iat", "iss", "name", "nbf", "sub")
_encoder = msgspec.json.Encoder()


class JwtError(Exception):
    """A token that is not a NATS JWT signed by its issuer; the message says what is wrong."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise JwtError("not base64url") from exc


def public_key_bytes(public_key: str, *, roles: tuple[str, ...]) -> bytes:
    """The raw ed25519 key of an encoded public nkey of one of ``roles``; JwtError if not."""
    if not public_key or public_key[0] not in roles:
        raise JwtError(f"{public_key[:1] or 'an empty key'!r} is not a {'/'.join(roles)} key")
    try:
        raw = base64.b32decode(public_key + "=" * (-len(public_key) % 8))
    except (binascii.Error, ValueError) as exc:
        raise JwtError("a public nkey is not base32") from exc
    if len(raw) != 35 or raw[0] != _PREFIXES[public_key[0]]:
        raise JwtError("malformed public nkey")
    if int.from_bytes(raw[33:], "little") != nkeys.crc16(bytearray(raw[:33])):
        raise JwtError("public nkey checksum mismatch")
    return raw[1:33]


def encode_public_key(raw: bytes, role: str) -> str:
    src = bytearray([_PREFIXES[role], *raw])
    src.extend(nkeys.crc16(src).to_bytes(2, "little"))
    return base64.b32encode(bytes(src)).decode().rstrip("=")


class Signer:
    """An nkey that signs (its seed is secret)."""

    def __init__(self, keys: nkeys.KeyPair) -> None:
        self._keys = keys
        self.public_key: str = keys.public_key.decode()

    @classmethod
    def from_seed(cls, seed: str | bytes) -> Signer:
        """From an encoded seed (``S`` + role + ...); ValueError when it is not one."""
        raw = seed.strip().encode() if isinstance(seed, str) else seed.strip()
        try:
            return cls(nkeys.from_seed(bytearray(raw)))
        except (nkeys.NkeysError, binascii.Error, ValueError, IndexError) as exc:
            raise ValueError("not an nkey seed") from exc

    @classmethod
    def generate(cls, role: str) -> Signer:
        return cls.from_seed(new_seed(role))

    def sign(self, data: bytes) -> bytes:
        signature: bytes = self._keys.sign(data)
        return signature


def new_seed(role: str) -> str:
    """A fresh random seed of ``role`` (``ACCOUNT``, ``USER``, ``SERVER``)."""
    seed: bytes = nkeys.encode_seed(os.urandom(32), _PREFIXES[role])
    return seed.decode()


def _jti(claims: dict[str, Any]) -> str:
    standard = {key: claims[key] for key in _STANDARD if key in claims and key != "jti"}
    digest = hashlib.new("sha512_256", _encoder.encode(standard)).digest()
    return base64.b32encode(digest).decode().rstrip("=")


def encode(claims: dict[str, Any], signer: Signer, *, now: float) -> str:
    """``claims`` issued by ``signer`` now: ``iss``, ``iat`` and ``jti`` are set here."""
    body = {**claims, "iss": signer.public_key, "iat": int(now)}
    body.pop("jti", None)
    body["jti"] = _jti(body)
    head = _b64(_encoder.encode(HEADER))
    payload = _b64(_encoder.encode(body))
    signed = f"{head}.{payload}"
    return f"{signed}.{_b64(signer.sign(signed.encode()))}"


def decode(token: str, *, roles: tuple[str, ...]) -> dict[str, Any]:
    """The claims of ``token`` once its signature by ``iss`` (a key of ``roles``) checks out.

    Expiry and audience are the caller's to check: they depend on what the token is for.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtError("expected three dot-separated parts")
    try:
        header = msgspec.json.decode(_unb64(parts[0]))
        claims = msgspec.json.decode(_unb64(parts[1]))
    except msgspec.DecodeError as exc:
        raise JwtError("header or payload is not JSON") from exc
    if not isinstance(header, dict) or any(header.get(k) != v for k, v in HEADER.items()):
        raise JwtError("not an ed25519-nkey JWT")
    if not isinstance(claims, dict):
        raise JwtError("claims are not an object")
    issuer = claims.get("iss")
    if not isinstance(issuer, str):
        raise JwtError("no issuer")
    key = nacl.signing.VerifyKey(public_key_bytes(issuer, roles=roles))
    try:
        key.verify(f"{parts[0]}.{parts[1]}".encode(), _unb64(parts[2]))
    except (nacl.exceptions.BadSignatureError, ValueError) as exc:
        raise JwtError("bad signature") from exc
    return claims
