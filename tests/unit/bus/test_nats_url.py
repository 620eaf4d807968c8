"""CDO_NATS_URL values that nats-py could never connect to, caught before a service starts."""

from __future__ import annotations

import pytest

from shared.bus.settings import nats_url_problem


@pytest.mark.parametrize(
    "urls",
    [
        "nats://127.0.0.1:4222",
        "127.0.0.1:4222",
        "tls://nats.cdo-system.svc:4222",
        "nats://user:secret@nats-0:4222, nats://nats-1:4222",
        "ws://nats:8080",
        "nats://[::1]:4222",
    ],
)
def test_urls_nats_py_accepts_pass(urls: str) -> None:
    assert nats_url_problem(urls) is None


@pytest.mark.parametrize(
    ("urls", "why"),
    [
        ("", "no URL given"),
        (" , ", "no URL given"),
        ("not a url", "'not a url': no host name"),
        ("http://nats:4222", "'http://nats:4222': the scheme must be one of nats, tls, ws, wss"),
        ("nats://nats:99999", "'nats://nats:99999': the port must be a number from 1 to 65535"),
        ("nats://nats:port", "'nats://nats:port': the port must be a number from 1 to 65535"),
        ("nats://nats:0", "'nats://nats:0': the port must be a number from 1 to 65535"),
        ("nats://:4222", "'nats://:4222': no host name"),
        ("nats://ok:4222,nats://", "'nats://': no host name"),
    ],
)
def test_urls_that_cannot_work_say_why(urls: str, why: str) -> None:
    assert nats_url_problem(urls) == why
