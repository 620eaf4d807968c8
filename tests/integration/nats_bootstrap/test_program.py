"""``python -m services nats-bootstrap`` as its Job runs it, against a real nats-server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sim.natsserver import NatsServer, free_port


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services", "nats-bootstrap"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_it_makes_the_stream_and_bucket_then_keeps_them(tmp_path: Path) -> None:
    server = NatsServer(store_dir=tmp_path / "nats")
    server.start()
    try:
        first = run({"CDO_NATS_URL": server.url})
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == (
            "nats-bootstrap: stream CDO created, bucket cdo-snapshots created"
        )
        again = run({"CDO_NATS_URL": server.url, "CDO_NATS_STREAM_MAX_AGE_S": "3600"})
        assert again.stdout.strip() == (
            "nats-bootstrap: stream CDO updated, bucket cdo-snapshots kept"
        )
    finally:
        server.stop()


def test_no_nats_and_bad_settings_say_what_is_wrong() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    down = run({"CDO_NATS_URL": url, "CDO_NATS_MAX_RECONNECT_ATTEMPTS": "1"})
    assert down.returncode == 1
    assert down.stderr.startswith(f"nats-bootstrap: cannot connect to NATS at {url}")
    bad = run({"CDO_NATS_URL": "http://nats:4222"})
    assert bad.returncode == 2
    assert "CDO_NATS_URL" in bad.stderr
    missing = run({"CDO_NATS_URL": url, "CDO_NATS_TOKEN_FILE": "/nonexistent/token"})
    assert missing.returncode == 2
    assert "CDO_NATS_TOKEN_FILE: cannot read /nonexistent/token" in missing.stderr
