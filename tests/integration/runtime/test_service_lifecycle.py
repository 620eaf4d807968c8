"""A real service process (tests.support.eventgen on the shared runtime) through its whole life."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request
from pathlib import Path

from sim.natsserver import NatsServer, free_port
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for_sync


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


def test_readyz_is_false_until_nats_connects(tmp_path: Path, service_env: dict[str, str]) -> None:
    late_server = NatsServer(store_dir=tmp_path / "late-nats")
    env = {**service_env, "CDO_NATS_URL": late_server.url}
    service = eventgen(tmp_path, env)
    port = int(env["CDO_HTTP_PORT"])
    try:
        status, body = wait_for_sync(
            lambda: (lambda r: r if r[0] else None)(http_get(port, "/readyz")), what="probe up"
        )
        assert status == 503 and "nats" in body
        assert http_get(port, "/healthz")[0] == 200
        late_server.start()
        wait_for_sync(lambda: http_get(port, "/readyz")[0] == 200, timeout=20, what="ready")
        _, metrics = http_get(port, "/metrics")
        wait_for_sync(
            lambda: "cdo_bus_messages_published_total{" in http_get(port, "/metrics")[1],
            what="published counter",
        )
        assert "# TYPE cdo_bus_messages_dropped_total counter" in metrics
    finally:
        service.stop()
        late_server.stop()


def test_service_publishes_again_after_nats_restarts(
    tmp_path: Path, service_env: dict[str, str], nats_server: NatsServer
) -> None:
    service = eventgen(tmp_path, service_env)
    port = int(service_env["CDO_HTTP_PORT"])
    consumer = tap(tmp_path, service_env)
    try:
        consumer.wait_for_stdout(lambda lines: len(lines) > 3, what="events before the restart")
        nats_server.kill()
        wait_for_sync(lambda: http_get(port, "/readyz")[0] == 503, what="unready while down")
        seen_before = len(consumer.stdout_json())
        nats_server.start()
        consumer.wait_for_stdout(
            lambda lines: len(lines) > seen_before + 3,
            timeout=30,
            what="events after the restart",
        )
        wait_for_sync(lambda: http_get(port, "/readyz")[0] == 200, what="ready again")
        assert service.returncode is None
        reconnected = [r for r in service.log_records() if r["message"] == "nats reconnected"]
        assert reconnected
    finally:
        consumer.stop()
        service.stop()


def test_a_connection_closed_for_good_exits_non_zero(
    tmp_path: Path, service_env: dict[str, str], nats_server: NatsServer
) -> None:
    env = {**service_env, "CDO_NATS_MAX_RECONNECT_ATTEMPTS": "3"}
    service = eventgen(tmp_path, env)
    port = int(env["CDO_HTTP_PORT"])
    try:
        wait_for_sync(lambda: http_get(port, "/readyz")[0] == 200, what="ready")
        nats_server.kill()
        assert service.wait(timeout=30) == 1
    finally:
        service.stop()
    record = shutdown_record(service)
    assert record["exit_code"] == 1
    assert any("BusClosedError" in str(r.get("reason", "")) for r in service.log_records())


def test_no_server_at_all_exits_non_zero(tmp_path: Path, service_env: dict[str, str]) -> None:
    env = {
        **service_env,
        "CDO_NATS_URL": f"nats://127.0.0.1:{free_port()}",
        "CDO_NATS_MAX_RECONNECT_ATTEMPTS": "2",
    }
    service = eventgen(tmp_path, env)
    try:
        assert service.wait(timeout=30) == 1
    finally:
        service.stop()
    assert "could not connect to NATS" in service.stderr_text()


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
