"""A real service process (tests.support.eventgen on the shared runtime) through its whole life."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

from sim.natsserver import NatsServer, free_port
from tests.e2e.contract import replay
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for_sync

STOP_PROMPTLY_S = 5.0
"""SIGTERM to exit with NATS down: no drain waits for a server that is not there."""


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return 0, ""


def eventgen(tmp_path: Path, env: dict[str, str], *args: str) -> ProgramProcess:
    return ProgramProcess(
        "tests.support.eventgen", "--interval", "0.05", *args, env=env, workdir=tmp_path
    ).start()


def tap(tmp_path: Path, env: dict[str, str]) -> ProgramProcess:
    tap_env = {**env, "CDO_HTTP_PORT": str(free_port())}
    process = ProgramProcess("tests.support.eventtap", env=tap_env, workdir=tmp_path).start()
    process.wait_for_stdout(lambda lines: lines, what="eventtap ready")
    return process


def shutdown_record(process: ProgramProcess) -> dict[str, object]:
    records = [r for r in process.log_records() if r["message"] == "shutdown complete"]
    assert records, process.stderr_text()[-2000:]
    return records[-1]


def test_sigterm_stops_cleanly_with_exit_zero_and_no_task_left(
    tmp_path: Path, service_env: dict[str, str]
) -> None:
    service = eventgen(tmp_path, service_env)
    port = int(service_env["CDO_HTTP_PORT"])
    try:
        wait_for_sync(lambda: http_get(port, "/readyz")[0] == 200, what="ready")
        service.send(signal.SIGTERM)
        assert service.wait() == 0
    finally:
        service.stop()
    record = shutdown_record(service)
    assert record["exit_code"] == 0
    assert record["leftover_tasks"] == 0, record["leftover_names"]


def readyz(port: int) -> dict[str, object] | None:
    status, body = http_get(port, "/readyz")
    return json.loads(body) if status else None


def metric(port: int, name: str) -> float | None:
    for line in http_get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def records(process: ProgramProcess, message: str) -> list[dict[str, object]]:
    return [r for r in process.log_records() if r["message"] == message]


def test_a_service_is_ready_without_nats_and_its_events_follow_when_nats_comes(
    tmp_path: Path, service_env: dict[str, str]
) -> None:
    late_server = NatsServer(store_dir=tmp_path / "late-nats")
    env = {
        **service_env,
        "CDO_NATS_URL": late_server.url,
        "CDO_NATS_RECONNECT_MAX_WAIT_S": "0.5",
    }
    service = eventgen(tmp_path, env, "--count", "12")
    port = int(env["CDO_HTTP_PORT"])
    try:
        state = wait_for_sync(lambda: readyz(port), what="probe up")
        assert state == {"ready": True, "failing": [], "degraded": ["nats"]}
        assert http_get(port, "/readyz")[0] == 200
        assert metric(port, "cdo_bus_connected") == 0
        # Published while NATS is down: every event waits in the outbox.
        wait_for_sync(lambda: metric(port, "cdo_bus_outbox_events") == 12, what="12 kept")
        assert len(records(service, "event feed down: cannot connect to NATS; retrying")) == 1
        assert service.returncode is None

        late_server.start()
        late_server.set_up_jetstream()
        wait_for_sync(
            lambda: readyz(port) == {"ready": True, "failing": [], "degraded": []},
            timeout=20,
            what="the feed up",
        )
        assert metric(port, "cdo_bus_connected") == 1
        wait_for_sync(lambda: metric(port, "cdo_bus_outbox_events") == 0, what="outbox empty")
        assert asyncio.run(replay(late_server.url)).events == 12
    finally:
        service.stop()
        late_server.stop()


def test_a_nats_outage_longer_than_any_budget_never_stops_a_service(
    tmp_path: Path, service_env: dict[str, str], nats_server: NatsServer
) -> None:
    env = {
        **service_env,
        "CDO_NATS_MAX_RECONNECT_ATTEMPTS": "1",  # a command's budget: a service ignores it
        "CDO_NATS_RECONNECT_MAX_WAIT_S": "0.4",
        "CDO_LOG_LEVEL": "debug",
    }
    service = eventgen(tmp_path, env)
    port = int(env["CDO_HTTP_PORT"])
    consumer = tap(tmp_path, service_env)
    try:
        consumer.wait_for_stdout(lambda lines: len(lines) > 3, what="events before the outage")
        nats_server.kill()
        wait_for_sync(
            lambda: readyz(port) == {"ready": True, "failing": [], "degraded": ["nats"]},
            what="degraded, still ready, while down",
        )
        wait_for_sync(
            lambda: len(records(service, "nats error")) >= 5,
            timeout=30,
            what="reconnect attempts past the budget",
        )
        assert service.returncode is None
        assert len(records(service, "nats disconnected")) == 1
        seen_before = len(consumer.stdout_json())
        nats_server.start()
        consumer.wait_for_stdout(
            lambda lines: len(lines) > seen_before + 3,
            timeout=30,
            what="events after the restart",
        )
        wait_for_sync(
            lambda: readyz(port) == {"ready": True, "failing": [], "degraded": []},
            what="the feed up again",
        )
        assert service.returncode is None
        assert records(service, "nats reconnected")
    finally:
        consumer.stop()
        service.stop()


def test_a_nats_url_that_never_answers_is_one_warning_and_sigterm_is_prompt(
    tmp_path: Path, service_env: dict[str, str]
) -> None:
    env = {**service_env, "CDO_NATS_URL": f"nats://127.0.0.1:{free_port()}"}
    service = eventgen(tmp_path, env)
    port = int(env["CDO_HTTP_PORT"])
    try:
        wait_for_sync(lambda: http_get(port, "/readyz")[0] == 200, what="ready without NATS")
        wait_for_sync(lambda: metric(port, "cdo_bus_outbox_events"), what="events kept")
        warnings = wait_for_sync(
            lambda: records(service, "event feed down: cannot connect to NATS; retrying"),
            what="the warning",
        )
        assert len(warnings) == 1 and warnings[0]["level"] == "warning"
        service.send(signal.SIGTERM)
        started = time.monotonic()
        assert service.wait(timeout=20) == 0
        assert time.monotonic() - started < STOP_PROMPTLY_S
    finally:
        service.stop()
    record = shutdown_record(service)
    assert record["exit_code"] == 0
    assert record["leftover_tasks"] == 0, record["leftover_names"]


def test_an_invalid_setting_is_named_and_exits_2(
    tmp_path: Path, service_env: dict[str, str]
) -> None:
    env = {**service_env, "CDO_NATS_MAX_RECONNECT_ATTEMPTS": "lots"}
    service = eventgen(tmp_path, env)
    try:
        assert service.wait() == 2
    finally:
        service.stop()
    assert "CDO_NATS_MAX_RECONNECT_ATTEMPTS='lots'" in service.stderr_text()
