"""Authenticating to NATS with a ServiceAccount token file (CDO_NATS_TOKEN_FILE)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.bus.connection import ConnectionWatch, connect_options
from shared.bus.settings import NatsSettings
from shared.errors import ConfigError


def options(token_file: str, *, user: str = "", password: str = "") -> dict[str, object]:
    settings = NatsSettings(token_file=token_file, user=user, password=password)
    return connect_options(settings, name="t", watch=ConnectionWatch())


def test_the_token_is_read_again_on_every_connect(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    token = options(token_file=str(path))["token"]
    assert callable(token)
    assert token() == "first"
    # The kubelet replaces the projected token before it expires.
    path.write_text("second")
    assert token() == "second"
    # A file that cannot be read for a moment: the last token read is sent.
    path.unlink()
    assert token() == "second"


@pytest.mark.parametrize(
    ("content", "why"),
    [(None, "cannot read"), ("", "is empty"), ("  \n", "is empty"), (b"\xff\xfe", "not a text")],
)
def test_a_bad_token_file_names_the_variable(
    tmp_path: Path, content: str | bytes | None, why: str
) -> None:
    path = tmp_path / "token"
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"CDO_NATS_TOKEN_FILE: .*{why}"):
        options(token_file=str(path))


def test_a_token_and_a_user_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("t")
    with pytest.raises(ConfigError, match=r"CDO_NATS_TOKEN_FILE: .*CDO_NATS_USER"):
        options(token_file=str(path), user="reader", password="pw")
