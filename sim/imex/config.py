"""Reading ``config.cfg``, the key=value file that ``nvidia-imex`` and ``nvidia-imex-ctl`` share.

The format is the real one: one ``KEY=value`` per line, ``#`` starts a comment line, blank lines
are skipped, an empty value means "use the default". Keys and defaults follow NVIDIA's IMEX
guide (config options page) and the annotated config.cfg the driver package ships; see
docs/simulated-imex.md. Keys the daemon does not know are collected in ``ignored_keys`` rather
than rejected, so a file written for a newer daemon still loads.

Everything here is a pure function of the text; ``load_config`` is the one thin reader.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from sim.imex.errors import ImexConfigError

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "AuthEncryptionMode",
    "AuthSource",
    "ImexConfig",
    "QuorumMode",
    "load_config",
    "parse_config",
    "unknown_key_warning",
]

DEFAULT_CONFIG_PATH = Path("/etc/nvidia-imex/config.cfg")


class QuorumMode(enum.StrEnum):
    """``IMEX_WAIT_FOR_QUORUM``: what the daemon waits for before it reports READY."""

    RECOVERY = "RECOVERY"
    NONE = "NONE"


class AuthEncryptionMode(enum.StrEnum):
    """``IMEX_AUTH_ENCRYPTION_MODE``."""

    SSL_TLS = "SSL_TLS"
    GSS_AUTH_ENCRYPT = "GSS_AUTH_ENCRYPT"
    GSS_AUTH_ONLY = "GSS_AUTH_ONLY"


class AuthSource(enum.StrEnum):
    """``IMEX_AUTH_SOURCE``: how the six key/cert/CA values are to be read."""

    FILE = "FILE"
    ENV_PATH = "ENV_PATH"
    ENV_VAL = "ENV_VAL"


class ImexConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The settings of one IMEX daemon, as written in its config.cfg.

    Field defaults are the daemon's documented defaults, with two exceptions that keep many
    simulated daemons on one host apart: ``log_file_name`` defaults to "" (log to stderr) instead
    of /var/log/nvidia-imex.log, and ``cmd_enabled`` defaults to False, as the daemon serves no
    command port unless asked to.
    """

    # Logging
    log_level: int = 4
    log_file_name: str = ""
    log_append_to_log: bool = True
    log_file_max_size_mb: int = 1024
    log_max_rotate_count: int = 3
    log_use_syslog: bool = False
    daemonize: bool = True
    # Peer service
    bind_interface_ip: str = ""
    server_port: int = 50000
    node_config_file: Path = Path("/etc/nvidia-imex/nodes_config.cfg")
    network_interface: str = ""
    wait_for_quorum: QuorumMode = QuorumMode.RECOVERY
    node_disconnected_grace_time: int = -1
    # Authentication and encryption between daemons
    enable_auth_encryption: bool = False
    auth_encryption_mode: AuthEncryptionMode | None = AuthEncryptionMode.SSL_TLS
    auth_source: AuthSource | None = None
    server_key: str = ""
    server_cert: str = ""
    server_cert_auth: str = ""
    client_key: str = ""
    client_cert: str = ""
    client_cert_auth: str = ""
    security_target_override: str = ""
    # Command service
    cmd_enabled: bool = False
    cmd_bind_interface_ip: str = ""
    cmd_port: int = 50005
    cmd_unix_domain_path: str = ""
    # Where the file came from and what it said that this daemon does not use
    source: Path | None = None
    ignored_keys: tuple[str, ...] = ()


# Keys the real daemon documents that the simulator reads but has no behaviour for; they are
# accepted silently so that a production config.cfg loads without warnings.
_ACCEPTED_WITHOUT_EFFECT = frozenset(
    {
        "STATS_FILE_NAME",
        "IMEX_GSS_SERVICE_NAME",
        "IMEX_GSS_TIMEOUT_SEC",
        "IMEX_GSS_RETRY_INTERVAL_SEC",
        "IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC",
        "IMEX_GSS_SHUTDOWN_ON_FAILURE",
    }
)

# Names that look like IMEX keys but are not, with the key that does what was probably meant.
_LOOKALIKES = {
    "SERVER_BIND_INTERFACE_IP": "BIND_INTERFACE_IP",
    "IMEX_BIND_INTERFACE_IP": "BIND_INTERFACE_IP",
    "IMEX_SERVER_PORT": "SERVER_PORT",
    "IMEX_GRACE_PERIOD": "IMEX_NODE_DISCONNECTED_GRACE_TIME",
    "IMEX_NODE_CONFIG": "IMEX_NODE_CONFIG_FILE",
    "NODE_CONFIG_FILE": "IMEX_NODE_CONFIG_FILE",
}


def unknown_key_warning(key: str) -> str:
    """The log line for a key the daemon ignores, naming the real key when one is close."""
    hint = _LOOKALIKES.get(key)
    suffix = f" (did you mean {hint}?)" if hint else ""
    return f"config: ignoring unknown key {key}{suffix}"


_E = TypeVar("_E", bound=enum.StrEnum)
_Setter = Callable[[dict[str, object], str, "_Where"], None]


class _Where(msgspec.Struct, frozen=True):
    source: str
    line: int
    key: str

    def fail(self, problem: str) -> ImexConfigError:
        return ImexConfigError(f"{self.source}:{self.line}: {self.key}: {problem}")


def _int_in(name: str, low: int, high: int) -> _Setter:
    def setter(fields: dict[str, object], value: str, where: _Where) -> None:
        try:
            number = int(value, 10)
        except ValueError:
            raise where.fail(f"{value!r} is not an integer") from None
        if not low <= number <= high:
            raise where.fail(f"{number} is out of range ({low}..{high})")
        fields[name] = number

    return setter


def _flag(name: str) -> _Setter:
    def setter(fields: dict[str, object], value: str, where: _Where) -> None:
        if value not in ("0", "1"):
            raise where.fail(f"{value!r} must be 0 or 1")
        fields[name] = value == "1"

    return setter


def _address(name: str) -> _Setter:
    def setter(fields: dict[str, object], value: str, where: _Where) -> None:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise where.fail(f"{value!r} is not an IPv4 or IPv6 address") from None
        fields[name] = value

    return setter


def _text(name: str) -> _Setter:
    def setter(fields: dict[str, object], value: str, where: _Where) -> None:
        fields[name] = value

    return setter


def _path(name: str) -> _Setter:
    def setter(fields: dict[str, object], value: str, where: _Where) -> None:
        fields[name] = Path(value)

    return setter


def _choice(name: str, kind: type[_E]) -> _Setter:
    def setter(fields: dict[str, object], value: str, where: _Where) -> None:
        try:
            fields[name] = kind(value.upper())
        except ValueError:
            allowed = ", ".join(member.value for member in kind)
            raise where.fail(f"{value!r} is not one of {allowed}") from None

    return setter


_PORT = (0, 65535)

_SETTERS: dict[str, _Setter] = {
    "LOG_LEVEL": _int_in("log_level", 0, 4),
    "LOG_FILE_NAME": _text("log_file_name"),
    "LOG_APPEND_TO_LOG": _flag("log_append_to_log"),
    "LOG_FILE_MAX_SIZE": _int_in("log_file_max_size_mb", 1, 1 << 20),
    "LOG_MAX_ROTATE_COUNT": _int_in("log_max_rotate_count", 0, 1000),
    "LOG_USE_SYSLOG": _flag("log_use_syslog"),
    "DAEMONIZE": _flag("daemonize"),
    "BIND_INTERFACE_IP": _address("bind_interface_ip"),
    "SERVER_PORT": _int_in("server_port", *_PORT),
    "IMEX_NODE_CONFIG_FILE": _path("node_config_file"),
    "NETWORK_INTERFACE": _text("network_interface"),
    "IMEX_WAIT_FOR_QUORUM": _choice("wait_for_quorum", QuorumMode),
    "IMEX_NODE_DISCONNECTED_GRACE_TIME": _int_in("node_disconnected_grace_time", -1, 1 << 31),
    "IMEX_ENABLE_AUTH_ENCRYPTION": _flag("enable_auth_encryption"),
    "IMEX_AUTH_ENCRYPTION_MODE": _choice("auth_encryption_mode", AuthEncryptionMode),
    "IMEX_AUTH_SOURCE": _choice("auth_source", AuthSource),
    "IMEX_SERVER_KEY": _text("server_key"),
    "IMEX_SERVER_CERT": _text("server_cert"),
    "IMEX_SERVER_CERT_AUTH": _text("server_cert_auth"),
    "IMEX_CLIENT_KEY": _text("client_key"),
    "IMEX_CLIENT_CERT": _text("client_cert"),
    "IMEX_CLIENT_CERT_AUTH": _text("client_cert_auth"),
    "IMEX_SECURITY_TARGET_OVERRIDE": _text("security_target_override"),
    "IMEX_CMD_ENABLED": _flag("cmd_enabled"),
    "IMEX_CMD_BIND_INTERFACE_IP": _address("cmd_bind_interface_ip"),
    "IMEX_CMD_PORT": _int_in("cmd_port", *_PORT),
    "IMEX_CMD_UNIX_DOMAIN_PATH": _text("cmd_unix_domain_path"),
}

# Keys whose empty value is itself meaningful: an empty mode is an error once encryption is on,
# where for every other key an empty value leaves the default in place.
_EMPTY_MEANS_UNSET = {
    "IMEX_AUTH_ENCRYPTION_MODE": "auth_encryption_mode",
    "IMEX_AUTH_SOURCE": "auth_source",
}


def parse_config(text: str, *, source: str | Path = "config.cfg") -> ImexConfig:
    """Parse the text of a config.cfg; raise ImexConfigError naming file, line and key.

    A relative IMEX_NODE_CONFIG_FILE is taken relative to the directory of ``source``, so a
    config directory can be moved as a whole.
    """
    where_file = str(source)
    fields: dict[str, object] = {}
    ignored: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ImexConfigError(f"{where_file}:{number}: expected KEY=value, got {line!r}")
        setter = _SETTERS.get(key)
        if setter is None:
            if key not in _ACCEPTED_WITHOUT_EFFECT and key not in ignored:
                ignored.append(key)
            continue
        if not value:
            if key in _EMPTY_MEANS_UNSET:
                fields[_EMPTY_MEANS_UNSET[key]] = None
            continue
        setter(fields, value, _Where(where_file, number, key))
    config = ImexConfig(**fields, ignored_keys=tuple(ignored))  # type: ignore[arg-type]
    node_file = config.node_config_file
    if isinstance(source, Path):
        if not node_file.is_absolute():
            node_file = source.parent / node_file
        config = msgspec.structs.replace(config, source=source, node_config_file=node_file)
    _check_consistency(config, where_file)
    return config


def load_config(path: str | Path) -> ImexConfig:
    """Read and parse the config.cfg at ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ImexConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise ImexConfigError(f"{path}: config file is not UTF-8 text") from None
    return parse_config(text, source=path)


def _check_consistency(config: ImexConfig, where_file: str) -> None:
    """Rules that span several keys, as the daemon applies them at initialization."""
    if not config.enable_auth_encryption:
        return
    if config.auth_encryption_mode is None:
        raise ImexConfigError(
            f"{where_file}: IMEX_AUTH_ENCRYPTION_MODE: must be set when "
            "IMEX_ENABLE_AUTH_ENCRYPTION=1 (SSL_TLS, GSS_AUTH_ENCRYPT or GSS_AUTH_ONLY)"
        )
    if config.auth_encryption_mode is not AuthEncryptionMode.SSL_TLS:
        raise ImexConfigError(
            f"{where_file}: IMEX_AUTH_ENCRYPTION_MODE: {config.auth_encryption_mode.value} "
            "(GSSAPI/Kerberos) is not supported by the simulated daemon; use SSL_TLS"
        )
    if config.auth_source is None:
        raise ImexConfigError(
            f"{where_file}: IMEX_AUTH_SOURCE: must be FILE, ENV_PATH or ENV_VAL when "
            "IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS"
        )
    missing = [
        key
        for key, value in (
            ("IMEX_SERVER_KEY", config.server_key),
            ("IMEX_SERVER_CERT", config.server_cert),
            ("IMEX_SERVER_CERT_AUTH", config.server_cert_auth),
            ("IMEX_CLIENT_KEY", config.client_key),
            ("IMEX_CLIENT_CERT", config.client_cert),
            ("IMEX_CLIENT_CERT_AUTH", config.client_cert_auth),
        )
        if not value
    ]
    if missing:
        raise ImexConfigError(
            f"{where_file}: {', '.join(missing)}: required when IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS"
        )
