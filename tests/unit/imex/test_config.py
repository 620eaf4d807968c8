from __future__ import annotations

from pathlib import Path

import pytest

from sim.imex.config import (
    AuthEncryptionMode,
    AuthSource,
    ImexConfig,
    QuorumMode,
    load_config,
    parse_config,
    unknown_key_warning,
)
from sim.imex.errors import ImexConfigError

# Shaped like the annotated config.cfg the driver package installs: comments, empty values
# that mean "default", every documented key.
PRODUCTION_LIKE = """\
# NVIDIA IMEX configuration file.
LOG_LEVEL=4
# LOG_FILE_NAME=/var/log/nvidia-imex.log
LOG_APPEND_TO_LOG=1
LOG_MAX_ROTATE_COUNT=3
LOG_USE_SYSLOG=0
DAEMONIZE=0
BIND_INTERFACE_IP=127.0.2.1
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
NETWORK_INTERFACE=
IMEX_WAIT_FOR_QUORUM=RECOVERY
IMEX_ENABLE_AUTH_ENCRYPTION=0
IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS
IMEX_AUTH_SOURCE=
IMEX_SERVER_KEY=
IMEX_SERVER_CERT=
IMEX_SERVER_CERT_AUTH=
IMEX_CLIENT_KEY=
IMEX_CLIENT_CERT=
IMEX_CLIENT_CERT_AUTH=
IMEX_SECURITY_TARGET_OVERRIDE=
IMEX_GSS_SERVICE_NAME=host
IMEX_GSS_TIMEOUT_SEC=-1
IMEX_CMD_ENABLED=1
IMEX_CMD_BIND_INTERFACE_IP=
IMEX_CMD_PORT=50005
IMEX_CMD_UNIX_DOMAIN_PATH=
IMEX_NODE_DISCONNECTED_GRACE_TIME=-1
"""


def test_a_production_shaped_file_parses_to_the_documented_values() -> None:
    config = parse_config(PRODUCTION_LIKE)

    assert config.bind_interface_ip == "127.0.2.1"
    assert config.server_port == 50000
    assert config.node_config_file == Path("/etc/nvidia-imex/nodes_config.cfg")
    assert config.wait_for_quorum is QuorumMode.RECOVERY
    assert config.cmd_enabled is True
    assert config.cmd_port == 50005
    assert config.cmd_bind_interface_ip == ""
    assert config.node_disconnected_grace_time == -1
    assert config.daemonize is False
    assert config.enable_auth_encryption is False
    assert config.ignored_keys == ()


def test_an_empty_file_gives_the_documented_defaults() -> None:
    config = parse_config("")

    assert config.server_port == 50000
    assert config.cmd_port == 50005
    assert config.daemonize is True
    assert config.log_level == 4
    assert config.wait_for_quorum is QuorumMode.RECOVERY
    assert config.node_config_file == Path("/etc/nvidia-imex/nodes_config.cfg")
    assert config.node_disconnected_grace_time == -1
    assert config.auth_encryption_mode is AuthEncryptionMode.SSL_TLS


def test_unknown_keys_are_collected_not_rejected() -> None:
    config = parse_config(
        "SERVER_PORT=50001\nSOME_FUTURE_KEY=1\nSERVER_BIND_INTERFACE_IP=1.2.3.4\n"
    )

    assert config.server_port == 50001
    assert config.ignored_keys == ("SOME_FUTURE_KEY", "SERVER_BIND_INTERFACE_IP")


def test_whitespace_around_key_and_value_is_tolerated() -> None:
    config = parse_config("  SERVER_PORT =  50010  \n\tIMEX_WAIT_FOR_QUORUM=none\n")

    assert config.server_port == 50010
    assert config.wait_for_quorum is QuorumMode.NONE


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("SERVER_PORT=70000", "SERVER_PORT: 70000 is out of range (0..65535)"),
        ("SERVER_PORT=fast", "SERVER_PORT: 'fast' is not an integer"),
        ("IMEX_CMD_ENABLED=yes", "IMEX_CMD_ENABLED: 'yes' must be 0 or 1"),
        ("BIND_INTERFACE_IP=node-1", "BIND_INTERFACE_IP: 'node-1' is not an IPv4 or IPv6 address"),
        ("IMEX_WAIT_FOR_QUORUM=ALL", "IMEX_WAIT_FOR_QUORUM: 'ALL' is not one of RECOVERY, NONE"),
        ("LOG_LEVEL=9", "LOG_LEVEL: 9 is out of range (0..4)"),
        ("IMEX_NODE_DISCONNECTED_GRACE_TIME=-2", "out of range"),
        ("just some words", "expected KEY=value"),
    ],
)
def test_invalid_values_name_the_file_line_and_key(line: str, fragment: str) -> None:
    with pytest.raises(ImexConfigError) as caught:
        parse_config(f"# header\n{line}\n", source="site.cfg")

    assert str(caught.value).startswith("site.cfg:2: ")
    assert fragment in str(caught.value)


def test_encryption_needs_a_source_and_all_six_credentials() -> None:
    with pytest.raises(
        ImexConfigError, match="IMEX_AUTH_SOURCE: must be FILE, ENV_PATH or ENV_VAL"
    ):
        parse_config("IMEX_ENABLE_AUTH_ENCRYPTION=1\n")

    with pytest.raises(ImexConfigError, match="IMEX_SERVER_CERT_AUTH, IMEX_CLIENT_KEY"):
        parse_config(
            "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_SOURCE=FILE\n"
            "IMEX_SERVER_KEY=k\nIMEX_SERVER_CERT=c\nIMEX_CLIENT_CERT=c\nIMEX_CLIENT_CERT_AUTH=a\n"
        )


def test_an_empty_encryption_mode_prevents_start_when_encryption_is_on() -> None:
    with pytest.raises(ImexConfigError, match="IMEX_AUTH_ENCRYPTION_MODE: must be set"):
        parse_config("IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=\n")


def test_gssapi_modes_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ImexConfigError, match="GSSAPI/Kerberos"):
        parse_config("IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=GSS_AUTH_ONLY\n")


def test_complete_tls_settings_parse() -> None:
    config = parse_config(
        "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_SOURCE=ENV_VAL\n"
        "IMEX_SERVER_KEY=SK\nIMEX_SERVER_CERT=SC\nIMEX_SERVER_CERT_AUTH=SA\n"
        "IMEX_CLIENT_KEY=CK\nIMEX_CLIENT_CERT=CC\nIMEX_CLIENT_CERT_AUTH=CA\n"
        "IMEX_SECURITY_TARGET_OVERRIDE=imex.local\n"
    )

    assert config.auth_source is AuthSource.ENV_VAL
    assert (config.server_key, config.client_cert_auth) == ("SK", "CA")
    assert config.security_target_override == "imex.local"


def test_a_relative_node_file_is_found_next_to_the_config(tmp_path: Path) -> None:
    path = tmp_path / "config.cfg"
    path.write_text("IMEX_NODE_CONFIG_FILE=nodes_config.cfg\n")

    config = load_config(path)

    assert config.node_config_file == tmp_path / "nodes_config.cfg"
    assert config.source == path


def test_a_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ImexConfigError, match=r"missing\.cfg: cannot read config file"):
        load_config(tmp_path / "missing.cfg")


def test_the_default_struct_matches_an_empty_file() -> None:
    assert parse_config("") == ImexConfig()


def test_a_lookalike_key_is_ignored_with_a_pointer_to_the_real_one() -> None:
    config = parse_config("SERVER_BIND_INTERFACE_IP=127.0.2.1\n")

    assert config.bind_interface_ip == ""
    assert unknown_key_warning("SERVER_BIND_INTERFACE_IP") == (
        "config: ignoring unknown key SERVER_BIND_INTERFACE_IP (did you mean BIND_INTERFACE_IP?)"
    )
    assert unknown_key_warning("FOO") == "config: ignoring unknown key FOO"
