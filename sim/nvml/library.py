"""The object that stands in for ``libnvidia-ml.so.1`` inside pynvml, and node selection.

pynvml keeps the loaded library in ``pynvml.nvmlLib`` and finds each C function with
``getattr(nvmlLib, name)`` (caching the result per name). :func:`install` puts one
:class:`SimulatedLibrary` there; its attributes are entry points that take the same ctypes
arguments as the C functions and return NVML return codes. Because pynvml caches entry
points per name for the whole process, an entry point cannot belong to one node: each call
looks up the node selected for the calling context (:func:`bind`) and runs there.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pynvml

from sim.nvml.cabi import NvmlCallError
from sim.nvml.node import SimulatedNvml
from sim.nvml.symbols import SYMBOLS, NodeSymbol, PlainSymbol, Symbol

_selected: contextvars.ContextVar[SimulatedNvml | None] = contextvars.ContextVar(
    "sim_nvml_selected_node", default=None
)


class NoNodeSelectedError(RuntimeError):
    """An NVML call ran in a context that no simulated node was bound to."""


def current_nvml() -> SimulatedNvml:
    """The node selected for the calling context; NoNodeSelectedError when there is none."""
    nvml = _selected.get()
    if nvml is None:
        raise NoNodeSelectedError(
            "pynvml was called where no simulated node is selected. Run the caller inside "
            "sim.nvml.bind(nvml), or in a task or thread started from there "
            "(asyncio tasks and asyncio.to_thread inherit it; a bare threading.Thread does "
            "not: use bound_context(nvml).run as its target)."
        )
    return nvml


def _node_entry(symbol: NodeSymbol) -> Callable[..., int]:
    implementation, requires_init = symbol.implementation, symbol.requires_init

    def entry(*arguments: object) -> int:
        nvml = current_nvml()
        with nvml.lock:
            if nvml.unavailable_code is not None:
                return nvml.unavailable_code
            if requires_init and nvml.init_count == 0:
                return int(pynvml.NVML_ERROR_UNINITIALIZED)
            try:
                implementation(nvml, *arguments)
            except NvmlCallError as failure:
                return failure.code
            return int(pynvml.NVML_SUCCESS)

    return entry


def _plain_entry(symbol: PlainSymbol) -> Callable[..., Any]:
    implementation = symbol.implementation

    def entry(*arguments: object) -> Any:
        return implementation(*arguments)

    return entry


def _entry_point(name: str, symbol: Symbol) -> Callable[..., Any]:
    # A fresh function per name, like a distinct C function pointer: pynvml sets attributes
    # such as ``restype`` on what it looks up.
    entry = _plain_entry(symbol) if isinstance(symbol, PlainSymbol) else _node_entry(symbol)
    entry.__name__ = entry.__qualname__ = name
    return entry


class SimulatedLibrary:
    """Stands where pynvml keeps its ``CDLL``: exported symbols are attributes."""

    def __init__(self, symbols: dict[str, Symbol]) -> None:
        self._exports = {name: _entry_point(name, symbol) for name, symbol in symbols.items()}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # Only reached for names that are not ordinary attributes: the C symbol lookup.
        try:
            return self._exports[name]
        except KeyError:
            raise AttributeError(f"simulated libnvidia-ml has no symbol {name}") from None

    def __dir__(self) -> list[str]:
        return sorted(self._exports)

    def __repr__(self) -> str:
        return f"<simulated libnvidia-ml, {len(self._exports)} symbols>"


LIBRARY = SimulatedLibrary(dict(SYMBOLS))
_replaced: list[Any] = []


def install() -> None:
    """Make pynvml use the simulated library (idempotent); :func:`bind` does this itself."""
    with pynvml.libLoadLock:
        if pynvml.nvmlLib is LIBRARY:
            return
        _replaced.append(pynvml.nvmlLib)
        pynvml.nvmlLib = LIBRARY
        # Entry points found in a library loaded before must not survive the swap.
        pynvml._nvmlGetFunctionPointer_cache.clear()


def uninstall() -> None:
    """Give pynvml back the library it had before :func:`install` (None: load on next init)."""
    with pynvml.libLoadLock:
        if pynvml.nvmlLib is not LIBRARY:
            return
        pynvml.nvmlLib = _replaced.pop() if _replaced else None
        pynvml._nvmlGetFunctionPointer_cache.clear()


def is_installed() -> bool:
    return pynvml.nvmlLib is LIBRARY


@contextmanager
def bind(nvml: SimulatedNvml) -> Iterator[SimulatedNvml]:
    """Select ``nvml`` for pynvml calls made in this context until the block ends.

    Tasks created and ``asyncio.to_thread`` calls made inside the block keep the selection
    after it ends, since they run in a copy of the context taken when they started.
    """
    install()
    token = _selected.set(nvml)
    try:
        yield nvml
    finally:
        _selected.reset(token)


def bound_context(nvml: SimulatedNvml) -> contextvars.Context:
    """A copy of the current context with ``nvml`` selected.

    For code started outside a :func:`bind` block: ``asyncio.create_task(coro,
    context=...)``, ``loop.run_in_executor(None, ctx.run, fn)``, or a thread's target.
    """
    install()
    context = contextvars.copy_context()
    context.run(_selected.set, nvml)
    return context
