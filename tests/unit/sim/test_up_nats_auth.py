"""``cdo sim up --nats-auth`` refuses what it cannot run, before it starts anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--nats-url", "nats://127.0.0.1:1"], "--nats-auth starts its own nats-server"),
    ],
)
def test_nats_auth_refuses_what_it_cannot_run(
    extra: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CDO_NATS_URL", raising=False)
    state = tmp_path / "state"
    code = main(["sim", "up", "--nats-auth", *extra, "--state-dir", str(state)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not state.exists(), "nothing is started or written"
