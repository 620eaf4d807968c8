"""config.cfg and the hosts block: what the daemon is given to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.imex_agent.files import atomic_write, write_if_changed, write_in_place_if_changed
from services.imex_agent.hostsfile import BEGIN, END, merge, parse_block
from services.imex_agent.imexconfig import ImexPaths, render_config
from services.imex_agent.settings import ImexSettings
from sim.imex import parse_config
from sim.imex.config import AuthEncryptionMode, AuthSource, QuorumMode

PATHS = ImexPaths(directory=Path("/run/cdo-imex"))


def test_config_is_read_by_the_daemon_as_intended() -> None:
    settings = ImexSettings(
        server_port=50100, cmd_port=50105, wait_for_quorum="NONE", disconnected_grace_s=30
    )
    text = render_config(settings=settings, address="10.1.2.3", paths=PATHS)
    config = parse_config(text, source="config.cfg")
    assert config.ignored_keys == ()
    assert config.daemonize is False
    assert config.bind_interface_ip == "10.1.2.3"
    assert config.cmd_bind_interface_ip == "10.1.2.3"
    assert config.server_port == 50100
    assert config.cmd_port == 50105
    assert config.cmd_enabled is True
    assert config.node_config_file == Path("/run/cdo-imex/nodes_config.cfg")
    assert config.wait_for_quorum is QuorumMode.NONE
    assert config.node_disconnected_grace_time == 30
    assert config.enable_auth_encryption is False


def test_config_with_tls_uses_the_mounted_secret_for_both_sides() -> None:
    settings = ImexSettings(tls_dir="/etc/cdo/imex-tls", tls_target_override="imex.cdo.test")
    config = parse_config(render_config(settings=settings, address="10.1.2.3", paths=PATHS))
    assert config.enable_auth_encryption is True
    assert config.auth_encryption_mode is AuthEncryptionMode.SSL_TLS
    assert config.auth_source is AuthSource.FILE
    assert config.server_key == config.client_key == "/etc/cdo/imex-tls/tls.key"
    assert config.server_cert == config.client_cert == "/etc/cdo/imex-tls/tls.crt"
    assert config.server_cert_auth == config.client_cert_auth == "/etc/cdo/imex-tls/ca.crt"
    assert config.security_target_override == "imex.cdo.test"


def test_config_is_a_pure_function_of_its_inputs() -> None:
    settings = ImexSettings()
    one = render_config(settings=settings, address="10.0.0.1", paths=PATHS)
    assert one == render_config(settings=settings, address="10.0.0.1", paths=PATHS)
    assert one != render_config(settings=settings, address="10.0.0.2", paths=PATHS)


KUBELET_HOSTS = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.0.0.5\tpod-x\n"


def test_hosts_block_is_appended_and_replaced_leaving_other_lines() -> None:
    first = merge(KUBELET_HOSTS, {"cdo-imex-aa-01": "10.0.0.2", "cdo-imex-aa-00": "10.0.0.1"})
    assert first.startswith(KUBELET_HOSTS)
    assert parse_block(first) == {"cdo-imex-aa-00": "10.0.0.1", "cdo-imex-aa-01": "10.0.0.2"}
    lines = first.splitlines()
    assert lines.index(BEGIN) < lines.index("10.0.0.1 cdo-imex-aa-00") < lines.index(END)
    second = merge(first, {"cdo-imex-aa-00": "10.0.0.9"})
    assert second.startswith(KUBELET_HOSTS)
    assert parse_block(second) == {"cdo-imex-aa-00": "10.0.0.9"}
    assert second.count(BEGIN) == 1
    assert merge(second, {"cdo-imex-aa-00": "10.0.0.9"}) == second


def test_hosts_block_in_an_empty_file() -> None:
    text = merge("", {"b": "10.0.0.2", "a": "10.0.0.1"})
    assert text.splitlines() == [BEGIN, "10.0.0.1 a", "10.0.0.2 b", END]


def test_writes_are_skipped_when_nothing_changed(tmp_path: Path) -> None:
    path = tmp_path / "d" / "f.cfg"
    assert write_if_changed(path, "a\n") is True
    assert write_if_changed(path, "a\n") is False
    assert write_in_place_if_changed(path, "a\n") is False
    assert write_in_place_if_changed(path, "b\n") is True
    assert path.read_text() == "b\n"
    assert [p.name for p in path.parent.iterdir()] == ["f.cfg"]


def test_atomic_write_leaves_no_temporary_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f"
    target.write_text("old")

    def broken(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", broken)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, b"new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
