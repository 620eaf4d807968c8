"""Authorization requests as nats-server sends them, and the signed answers."""

from __future__ import annotations

from typing import Any

import pytest

from services.nats_auth import nkeyjwt
from services.nats_auth.nkeyjwt import ACCOUNT, SERVER, USER, Signer
from services.nats_auth.permissions import Permissions
from services.nats_auth.protocol import (
    REQUEST_TYPE,
    RESPONSE_TYPE,
    MalformedRequestError,
    parse_request,
    response,
    user_jwt,
)

NOW = 1_800_000_000.0
ISSUER = Signer.generate(ACCOUNT)
SERVER_KEY = Signer.generate(SERVER)


def request_bytes(
    *, signer: Signer = SERVER_KEY, sub: str = "", exp: int = 0, **nats: Any
) -> bytes:
    body: dict[str, Any] = {
        "server_id": {"id": SERVER_KEY.public_key, "name": "s", "host": "h"},
        "user_nkey": Signer.generate(USER).public_key,
        "client_info": {"host": "10.0.0.1", "id": 7, "name": "cdo-imex-agent"},
        "connect_opts": {"auth_token": "tok", "protocol": 1, "lang": "python3"},
        "type": REQUEST_TYPE,
        "version": 2,
        **nats,
    }
    claims = {
        "sub": sub or ISSUER.public_key,
        "aud": "nats-authorization-request",
        "exp": exp or int(NOW) + 2,
        "nats": body,
    }
    return nkeyjwt.encode(claims, signer, now=NOW).encode()


def test_a_request_from_the_server_parses() -> None:
    request = parse_request(request_bytes(), issuer=ISSUER.public_key, now=NOW)
    assert request.server_id.id == SERVER_KEY.public_key
    assert request.connect_opts.auth_token == "tok"
    assert request.client_info.name == "cdo-imex-agent"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff\xfe", "ascii"),
        (b"not.a.jwt", "base64url|JSON"),
        (request_bytes(signer=Signer.generate(SERVER)), "another server"),
        (request_bytes(sub=Signer.generate(ACCOUNT).public_key), "another issuer"),
        (request_bytes(exp=int(NOW) - 1), "expired"),
        (request_bytes(type="authorization_response"), "claim type"),
        (request_bytes(user_nkey=SERVER_KEY.public_key), "user_nkey"),
        (request_bytes(user_nkey=""), "user_nkey|length"),
        (
            request_bytes(server_id={"id": SERVER_KEY.public_key, "xkey": "XAB"}),
            "xkey",
        ),
        (request_bytes(signer=Signer.generate(ACCOUNT)), "not a N key"),
    ],
)
def test_malformed_requests_are_refused_with_the_reason(data: bytes, why: str) -> None:
    with pytest.raises(MalformedRequestError, match=why):
        parse_request(data, issuer=ISSUER.public_key, now=NOW)


def test_an_authorized_answer_carries_the_user_for_this_server_and_connection() -> None:
    request = parse_request(request_bytes(), issuer=ISSUER.public_key, now=NOW)
    permissions = Permissions(
        publish_allow=("a.>",), publish_deny=("a.b",), subscribe_allow=("_INBOX.>",)
    )
    user = user_jwt(
        request,
        permissions,
        signer=ISSUER,
        account="CDO",
        name="ns/sa@n1",
        expires=int(NOW) + 600,
        now=NOW,
    )
    answer = nkeyjwt.decode(
        response(request, signer=ISSUER, now=NOW, user=user).decode(), roles=(ACCOUNT,)
    )
    assert answer["sub"] == request.user_nkey
    assert answer["aud"] == SERVER_KEY.public_key
    assert answer["iss"] == ISSUER.public_key
    assert answer["nats"] == {"type": RESPONSE_TYPE, "version": 2, "jwt": user}
    claims = nkeyjwt.decode(answer["nats"]["jwt"], roles=(ACCOUNT,))
    assert claims["sub"] == request.user_nkey
    assert claims["aud"] == "CDO"
    assert claims["exp"] == int(NOW) + 600
    assert claims["name"] == "ns/sa@n1"
    assert claims["nats"]["pub"] == {"allow": ["a.>"], "deny": ["a.b"]}
    assert claims["nats"]["sub"] == {"allow": ["_INBOX.>"]}
    assert claims["nats"]["type"] == "user" and claims["nats"]["version"] == 2


def test_a_refusal_carries_the_reason_and_no_user() -> None:
    request = parse_request(request_bytes(), issuer=ISSUER.public_key, now=NOW)
    answer = nkeyjwt.decode(
        response(request, signer=ISSUER, now=NOW, error="token refused").decode(),
        roles=(ACCOUNT,),
    )
    assert answer["nats"] == {"type": RESPONSE_TYPE, "version": 2, "error": "token refused"}
    assert answer["aud"] == SERVER_KEY.public_key
