"""How a simulated C symbol is described: its implementation and what it needs first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NodeSymbol:
    """A symbol answered by the selected node's NVML.

    ``implementation(nvml, *c_arguments)`` returns nothing on success and raises
    ``NvmlCallError`` otherwise; it runs with the node's lock held. Symbols other than the
    nvmlInit family need an initialised library, as in NVML.
    """

    implementation: Callable[..., None]
    requires_init: bool = True


@dataclass(frozen=True)
class PlainSymbol:
    """A symbol that needs no node (nvmlErrorString); its result is returned as is."""

    implementation: Callable[..., Any]


Symbol = NodeSymbol | PlainSymbol
