"""The backoff of a service's NATS connection (pure parts)."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from nats.aio.client import Server

from shared.bus.link import reconnect_delay, reconnect_handler
from shared.bus.settings import NatsSettings


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 0.0), (1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, 30.0), (60, 30.0), (10_000, 30.0)],
)
def test_the_pause_doubles_from_the_first_up_to_the_cap(failures: int, expected: float) -> None:
    assert reconnect_delay(failures, first_s=1.0, cap_s=30.0, draw=lambda: 0.0) == expected


def test_each_pause_is_shortened_by_at_most_the_spread() -> None:
    assert reconnect_delay(6, first_s=1.0, cap_s=30.0, spread=0.2, draw=lambda: 1.0) == 24.0
    assert reconnect_delay(1, first_s=0.5, cap_s=30.0, spread=0.2, draw=lambda: 0.5) == 0.45


def test_a_reconnect_goes_to_the_server_tried_least_after_its_backoff() -> None:
    choose = reconnect_handler(NatsSettings(reconnect_wait_s=0.5, reconnect_max_wait_s=4.0))
    a = Server(uri=urlparse("nats://a:4222"), reconnects=7)
    b = Server(uri=urlparse("nats://b:4222"), reconnects=2)
    server, delay = choose([a, b], {})
    assert server is b
    assert 0.8 <= delay <= 1.0  # 0.5 doubled once, less up to a fifth
    server, delay = choose([a], {})
    assert server is a and 3.2 <= delay <= 4.0  # capped
