"""Reading what ``nvidia-imex-ctl`` prints (pure).

``-q`` prints the daemon's state on one line (READY, INITIALIZING, ...; UNAVAILABLE when the
daemon cannot be reached). ``-N -j`` prints the domain as JSON::

    {"nodes": {"0": {"status": "READY", "host": "10.0.0.1",
                     "connections": {"0": {"host": "10.0.0.1", "status": "CONNECTED", ...}, ...},
                     "changed": true, "version": "..."}, ...},
     "timestamp": "...", "status": "UP"}

Row *i* is node *i*'s own view of its link to every node. Members this module does not use
(``changed``, ``version``, ``timestamp``, a simulator's ``refused``) are ignored, and
``hostName`` is read when present.
"""

from __future__ import annotations

import msgspec

from shared.errors import CdoError

UNAVAILABLE = "UNAVAILABLE"
READY = "READY"
CONNECTED = "CONNECTED"


class ReportError(CdoError):
    """nvidia-imex-ctl printed something this module cannot read."""


class PeerLink(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    host: str
    state: str


class NodeReport(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    host: str
    state: str
    links: tuple[PeerLink, ...] = ()


class DomainReport(msgspec.Struct, frozen=True, kw_only=True):
    state: str
    nodes: tuple[NodeReport, ...] = ()

    def row(self, host: str) -> NodeReport | None:
        """The node reported at ``host`` (this node's own view when ``host`` is its address)."""
        return next((node for node in self.nodes if node.host == host), None)


class _Connection(msgspec.Struct, frozen=True):
    status: str
    host: str = ""


class _Node(msgspec.Struct, frozen=True):
    status: str
    host: str = ""
    connections: dict[str, _Connection] = {}


class _Domain(msgspec.Struct, frozen=True):
    status: str
    nodes: dict[str, _Node] = {}


_decoder = msgspec.json.Decoder(_Domain)


def _index(key: str) -> int:
    if not key.isdigit():
        raise ReportError(f"node index {key!r} is not a number")
    return int(key)


def parse_domain_report(text: str | bytes) -> DomainReport:
    """The ``-N -j`` document as a DomainReport, nodes and links in index order."""
    try:
        document = _decoder.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReportError(f"nvidia-imex-ctl -N -j: {exc}") from None
    nodes = []
    for key, node in document.nodes.items():
        links = tuple(
            sorted(
                (
                    PeerLink(index=_index(column), host=cell.host, state=cell.status)
                    for column, cell in node.connections.items()
                ),
                key=lambda link: link.index,
            )
        )
        nodes.append(NodeReport(index=_index(key), host=node.host, state=node.status, links=links))
    nodes.sort(key=lambda node: node.index)
    return DomainReport(state=document.status, nodes=tuple(nodes))


def parse_state(text: str) -> str:
    """The state ``-q`` printed: its first non-empty line, or UNAVAILABLE for nothing."""
    for line in text.splitlines():
        word = line.strip()
        if word:
            return word.split()[0]
    return UNAVAILABLE
