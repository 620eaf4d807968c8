"""The node map: ``nodes_config.cfg``, its digest, and how its names become addresses.

``nodes_config.cfg`` lists one IP address or hostname per line; the line order is the node
index every daemon and ``nvidia-imex-ctl -N`` use ("Node #0" is the first line). Two daemons
belong to the same IMEX domain only when their maps are identical, which the peer handshake
checks by comparing ``NodeMap.digest``. The digest covers the entries as written, not what they
resolve to, so that re-pointing a stable hostname at a new address (the documented way to
replace a node without restarting its peers) leaves the map, and the domain, intact.

Names are resolved like a host with ``hosts: files dns`` in nsswitch.conf: first a hosts file
(by default none; the simulator points ``CDO_SIM_IMEX_HOSTS_FILE`` at a per-cluster file because
it cannot edit /etc/hosts), then the system resolver (which a caller may turn off: a name the
hosts file does not list then does not resolve). As with glibc's ``files`` source, the hosts
file is read again for every lookup, so an edit is seen by the very next one.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import os
import re
import socket
from pathlib import Path

import msgspec

from sim.imex.errors import ImexConfigError

__all__ = [
    "HOSTS_FILE_ENV",
    "NodeMap",
    "Resolver",
    "is_address",
    "load_node_map",
    "parse_hosts",
    "parse_node_map",
]

HOSTS_FILE_ENV = "CDO_SIM_IMEX_HOSTS_FILE"

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?$")


class NodeMap(msgspec.Struct, frozen=True, kw_only=True):
    """The ordered entries of one nodes_config.cfg and the digest peers compare."""

    entries: tuple[str, ...]
    digest: str

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def of(cls, entries: tuple[str, ...]) -> NodeMap:
        """Build a map from already normalized entries."""
        canonical = "\n".join(entries).encode()
        return cls(entries=entries, digest=hashlib.sha256(canonical).hexdigest()[:16])


def is_address(entry: str) -> bool:
    """Whether ``entry`` is an IP literal (as opposed to a hostname to resolve)."""
    try:
        ipaddress.ip_address(entry)
    except ValueError:
        return False
    return True


def _normalize(entry: str) -> str | None:
    try:
        return str(ipaddress.ip_address(entry))
    except ValueError:
        pass
    if _HOSTNAME.match(entry):
        # DNS names compare case-insensitively; the map digest must too.
        return entry.rstrip(".").lower()
    return None


def parse_node_map(text: str, *, source: str | Path = "nodes_config.cfg") -> NodeMap:
    """Parse the text of a nodes_config.cfg; blank lines and ``#`` comment lines are skipped."""
    entries: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        entry = _normalize(line)
        if entry is None:
            raise ImexConfigError(
                f"{source}:{number}: {line!r} is neither an IP address nor a valid hostname"
            )
        if entry in seen:
            raise ImexConfigError(
                f"{source}:{number}: {entry} is listed twice (first on line {seen[entry]})"
            )
        seen[entry] = number
        entries.append(entry)
    if not entries:
        raise ImexConfigError(f"{source}: lists no nodes (one IP address or hostname per line)")
    return NodeMap.of(tuple(entries))


def load_node_map(path: Path) -> NodeMap:
    """Read and parse the nodes_config.cfg at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ImexConfigError(
            f"{path}: cannot read IMEX_NODE_CONFIG_FILE: {exc.strerror or exc}"
        ) from exc
    except UnicodeDecodeError:
        raise ImexConfigError(f"{path}: IMEX_NODE_CONFIG_FILE is not UTF-8 text") from None
    return parse_node_map(text, source=path)


def parse_hosts(text: str) -> dict[str, str]:
    """Parse hosts-file text into name -> address; the first line naming a host wins."""
    table: dict[str, str] = {}
    for raw in text.splitlines():
        fields = raw.split("#", 1)[0].split()
        if len(fields) < 2 or not is_address(fields[0]):
            continue
        address = str(ipaddress.ip_address(fields[0]))
        for name in fields[1:]:
            table.setdefault(name.rstrip(".").lower(), address)
    return table


class Resolver:
    """Turns node-map entries into addresses: hosts file first, then the system resolver.

    The hosts file is read again for every lookup (:meth:`resolve_all` reads it once for the
    whole map), so a resolution made after an update (a reconnect attempt, SIGUSR1, a ``-N``
    query) sees the new address. With ``system=False`` only the hosts file is consulted.
    """

    def __init__(self, hosts_file: Path | None = None, *, system: bool = True) -> None:
        self._hosts_file = hosts_file
        self._system = system

    @classmethod
    def from_environment(cls, hosts_file: Path | None = None) -> Resolver:
        """Use ``hosts_file`` if given, else the file named by CDO_SIM_IMEX_HOSTS_FILE, if any."""
        if hosts_file is None and os.environ.get(HOSTS_FILE_ENV):
            hosts_file = Path(os.environ[HOSTS_FILE_ENV])
        return cls(hosts_file)

    def _hosts(self) -> dict[str, str]:
        if self._hosts_file is None:
            return {}
        try:
            return parse_hosts(self._hosts_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return {}

    async def resolve(self, entry: str) -> str | None:
        """The address ``entry`` stands for now, or None when it does not resolve."""
        return await self._resolve(entry, self._hosts())

    async def _resolve(self, entry: str, hosts: dict[str, str]) -> str | None:
        if is_address(entry):
            return entry
        address = hosts.get(entry)
        if address is not None or not self._system:
            return address
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(entry, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return None
        for family, _type, _proto, _name, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                return str(sockaddr[0])
        return None

    async def resolve_all(self, node_map: NodeMap) -> tuple[str | None, ...]:
        """Resolve every entry of ``node_map`` in order (one read of the hosts file)."""
        hosts = self._hosts()
        return tuple([await self._resolve(entry, hosts) for entry in node_map.entries])
