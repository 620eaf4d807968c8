"""Read a topology from YAML and expand it, turning every problem into a TopologyError."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from sim.topology.errors import TopologyError
from sim.topology.expand import expand
from sim.topology.model import Cluster
from sim.topology.spec import TopologySpec

TOPOLOGIES_DIR = Path(__file__).resolve().parent.parent / "topologies"
DEFAULT_TOPOLOGY = TOPOLOGIES_DIR / "default.yaml"

# msgspec ends a validation message with " - at `$.racks[1].cliques[0].id`".
_AT_PATH = re.compile(r"^(?P<problem>.*) - at `\$\.?(?P<path>[^`]*)`$", re.DOTALL)


def parse_spec(text: str | bytes) -> TopologySpec:
    """The spec written in ``text``; an empty document is the default topology."""
    if not str(text if isinstance(text, str) else text.decode()).strip():
        return TopologySpec()
    try:
        return msgspec.yaml.decode(text, type=TopologySpec)
    except msgspec.ValidationError as error:
        raise _validation_error(str(error)) from None
    except msgspec.DecodeError as error:
        raise TopologyError("(document)", f"not valid YAML: {error}") from None


def parse_topology(text: str | bytes) -> Cluster:
    """The cluster the YAML in ``text`` describes."""
    return expand(parse_spec(text))


def load_topology(path: str | Path = DEFAULT_TOPOLOGY) -> Cluster:
    """The cluster described by the file at ``path`` (the default topology when omitted)."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as error:
        raise TopologyError(
            "(file)", f"cannot be read: {error.strerror}", source=str(path)
        ) from None
    try:
        return parse_topology(text)
    except TopologyError as error:
        raise error.in_source(str(path)) from None


def _validation_error(message: str) -> TopologyError:
    match = _AT_PATH.match(message)
    if match is None:
        return TopologyError("(document)", message.replace("`", ""))
    return TopologyError(match["path"] or "(document)", match["problem"].replace("`", ""))
