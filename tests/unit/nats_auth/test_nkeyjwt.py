"""NATS JWTs: encoding, signature checks, nkey roles."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from services.nats_auth import nkeyjwt
from services.nats_auth.nkeyjwt import ACCOUNT, SERVER, USER, JwtError, Signer


def parts(token: str) -> list[dict[str, object]]:
    out = []
    for part in token.split(".")[:2]:
        out.append(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))
    return out


def test_a_token_round_trips_with_the_nats_header_and_claims() -> None:
    signer = Signer.generate(ACCOUNT)
    token = nkeyjwt.encode({"sub": "U", "nats": {"type": "user"}}, signer, now=1700000000.7)
    header, claims = parts(token)
    assert header == {"typ": "JWT", "alg": "ed25519-nkey"}
    assert claims["iss"] == signer.public_key and claims["iat"] == 1700000000
    assert nkeyjwt.decode(token, roles=(ACCOUNT,)) == claims
    assert "=" not in token


def test_the_jti_is_the_hash_of_the_standard_claims() -> None:
    signer = Signer.generate(ACCOUNT)
    token = nkeyjwt.encode({"sub": "U", "exp": 5, "nats": {"x": 1}}, signer, now=1)
    claims = parts(token)[1]
    standard = {"exp": 5, "iat": 1, "iss": signer.public_key, "sub": "U"}
    ordered = {
        k: standard[k] for k in ("aud", "exp", "iat", "iss", "name", "nbf", "sub") if k in standard
    }
    digest = hashlib.new("sha512_256", json.dumps(ordered, separators=(",", ":")).encode()).digest()
    assert claims["jti"] == base64.b32encode(digest).decode().rstrip("=")


def test_a_changed_payload_fails_the_signature() -> None:
    token = nkeyjwt.encode({"sub": "U"}, Signer.generate(ACCOUNT), now=1)
    head, _, sig = token.split(".")
    claims = parts(token)[1]
    claims["sub"] = "V"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(JwtError, match="bad signature"):
        nkeyjwt.decode(f"{head}.{forged}.{sig}", roles=(ACCOUNT,))


def test_a_token_signed_by_another_key_than_its_issuer_fails() -> None:
    claimed, actual = Signer.generate(ACCOUNT), Signer.generate(ACCOUNT)
    token = nkeyjwt.encode({"sub": "U"}, actual, now=1)
    head, _, sig = token.split(".")
    claims = parts(token)[1] | {"iss": claimed.public_key}
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(JwtError, match="bad signature"):
        nkeyjwt.decode(f"{head}.{payload}.{sig}", roles=(ACCOUNT,))


def test_the_issuer_must_have_an_expected_role() -> None:
    token = nkeyjwt.encode({"sub": "U"}, Signer.generate(USER), now=1)
    with pytest.raises(JwtError, match="is not a N key"):
        nkeyjwt.decode(token, roles=(SERVER,))


@pytest.mark.parametrize(
    "token",
    ["", "a.b", "a.b.c.d", "!!!.e30.sig", "e30.bm90IGpzb24.c2ln", "eyJ0eXAiOiJKV1QifQ.e30.c2ln"],
)
def test_malformed_tokens_raise_jwt_error(token: str) -> None:
    with pytest.raises(JwtError):
        nkeyjwt.decode(token, roles=(ACCOUNT,))


def test_public_keys_carry_role_and_checksum() -> None:
    key = Signer.generate(SERVER).public_key
    raw = nkeyjwt.public_key_bytes(key, roles=(SERVER,))
    assert nkeyjwt.encode_public_key(raw, SERVER) == key
    broken = key[:-1] + ("A" if key[-1] != "A" else "B")
    with pytest.raises(JwtError):
        nkeyjwt.public_key_bytes(broken, roles=(SERVER,))
    with pytest.raises(JwtError):
        nkeyjwt.public_key_bytes(key, roles=(USER,))


def test_seeds_name_their_role_and_bad_ones_are_refused() -> None:
    seed = nkeyjwt.new_seed(ACCOUNT)
    assert seed.startswith("SA")
    assert Signer.from_seed(seed + "\n").public_key.startswith("A")
    with pytest.raises(ValueError, match="not an nkey seed"):
        Signer.from_seed("SAnot-a-seed")
