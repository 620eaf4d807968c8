"""The authenticator's settings and its request queue."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.nats_auth import nkeyjwt
from services.nats_auth.callout import Authenticator, CalloutMetrics
from services.nats_auth.permissions import Policy
from services.nats_auth.review import Reviewed
from services.nats_auth.service import load
from services.nats_auth.settings import describe
from shared.errors import ConfigError
from shared.metrics import Metrics
from tests.support.wait import wait_for

VARIABLE = "CDO_NATS_AUTH_ISSUER_SEED_FILE"


def test_the_issuer_seed_is_checked_when_the_settings_load(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.write_text(nkeyjwt.new_seed(nkeyjwt.ACCOUNT) + "\n")
    assert load({VARIABLE: str(seed)}).issuer_seed_file == str(seed)
    with pytest.raises(ConfigError, match=f"{VARIABLE}: cannot read"):
        load({VARIABLE: str(tmp_path / "missing")})
    seed.write_text("hello")
    with pytest.raises(ConfigError, match=f"{VARIABLE}: .* does not hold an nkey seed"):
        load({VARIABLE: str(seed)})
    seed.write_text(nkeyjwt.new_seed(nkeyjwt.USER))
    with pytest.raises(ConfigError, match=f"{VARIABLE}: .* not an account's"):
        load({VARIABLE: str(seed)})


def test_bad_settings_name_their_variable(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.write_text(nkeyjwt.new_seed(nkeyjwt.ACCOUNT))
    with pytest.raises(ConfigError, match="CDO_NATS_AUTH_WORKERS"):
        load({VARIABLE: str(seed), "CDO_NATS_AUTH_WORKERS": "0"})
    assert "CDO_NATS_AUTH_READERS" in describe()


class Sent:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []

    async def publish(self, subject: str, payload: bytes = b"") -> None:
        self.messages.append((subject, payload))


class Request:
    data = b"x"
    reply = "_INBOX.1"


async def never(token: str) -> Reviewed:
    raise AssertionError("no request is reviewed here")


async def test_requests_beyond_the_queue_are_counted_and_dropped() -> None:
    metrics = Metrics()
    authenticator = Authenticator(
        connection=Sent(),
        reviewer=never,
        signer=nkeyjwt.Signer.generate(nkeyjwt.ACCOUNT),
        policy=Policy(namespace="cdo-system"),
        account="CDO",
        metrics=CalloutMetrics(metrics.registry),
        queue_size=2,
    )
    for _ in range(3):
        await authenticator.receive(Request())

    def count(result: str) -> float:
        labels = {"result": result}
        return metrics.registry.get_sample_value("cdo_nats_auth_requests_total", labels) or 0.0

    assert count("overloaded") == 1
    # The two queued ones are handled (malformed here) once workers run.
    task = asyncio.create_task(authenticator.run())
    try:
        await wait_for(lambda: count("malformed") == 2, what="the queued requests handled")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
