"""The C symbols the simulated library exports, by name, as pynvml looks them up.

A name missing here is a symbol this library does not have: pynvml's lookup fails with
NVMLError_FunctionNotFound, as it does against a driver that predates the symbol.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.nvml.symbols import devices, events, fabric, health, system
from sim.nvml.symbols.table import NodeSymbol, PlainSymbol, Symbol

SYMBOLS: Mapping[str, Symbol] = {
    **system.SYMBOLS,
    **devices.SYMBOLS,
    **fabric.SYMBOLS,
    **health.SYMBOLS,
    **events.SYMBOLS,
}

__all__ = ["SYMBOLS", "NodeSymbol", "PlainSymbol", "Symbol"]
