"""CEL device selectors, evaluated with cel-python.

A selector sees one variable, ``device``, with ``driver`` (a string), ``attributes`` (a map from
attribute domain to a map from attribute name to its value) and ``capacity`` (the same shape,
each value the quantity's text). An attribute written without a domain in the ResourceSlice
belongs to the driver's domain, so ``device.attributes["gpu.example.com"].model`` reads the
attribute ``model`` of a device of driver ``gpu.example.com``.

Evaluating CEL in Python costs a few hundred microseconds, so results are cached by
(expression, device content): the same device is judged once however often it is looked at.
An expression that fails to compile or to evaluate (a missing attribute, a non-boolean result)
does not select the device; the error is kept for the unschedulable message.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import celpy
import msgspec
from celpy import celtypes

from sim.scheduler.objects import AttributeValue

# cel-python logs each evaluation error itself; here an error is an expected outcome.
logging.getLogger("celpy").setLevel(logging.CRITICAL)
logging.getLogger("Evaluator").setLevel(logging.CRITICAL)

_ENV = celpy.Environment()


class CelOutcome(msgspec.Struct, frozen=True):
    matched: bool
    error: str = ""


class _Compiled(msgspec.Struct, frozen=True):
    program: Any = None
    error: str = ""


@lru_cache(maxsize=1024)
def _compile(expression: str) -> _Compiled:
    try:
        return _Compiled(program=_ENV.program(_ENV.compile(expression)))
    except Exception as exc:  # cel-python raises parser-specific exception types
        text = str(exc).strip()
        return _Compiled(error=f"compilation failed: {text.splitlines()[0] if text else exc!r}")


def compile_error(expression: str) -> str:
    """The compile error of ``expression``, or ""."""
    return _compile(expression).error


def _cel_value(value: AttributeValue) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    return celtypes.StringType(value)


def device_activation(
    *,
    driver: str,
    attributes: dict[str, dict[str, AttributeValue]],
    capacity: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """The ``device`` variable for one device (attributes and capacity grouped by domain)."""
    device = celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): celtypes.MapType(
                {
                    celtypes.StringType(domain): celtypes.MapType(
                        {celtypes.StringType(k): _cel_value(v) for k, v in values.items()}
                    )
                    for domain, values in attributes.items()
                }
            ),
            celtypes.StringType("capacity"): celtypes.MapType(
                {
                    celtypes.StringType(domain): celtypes.MapType(
                        {celtypes.StringType(k): celtypes.StringType(v) for k, v in values.items()}
                    )
                    for domain, values in capacity.items()
                }
            ),
        }
    )
    return {"device": device}


def evaluate(expression: str, activation: dict[str, Any]) -> CelOutcome:
    """Evaluate one selector against one device's activation (uncached)."""
    compiled = _compile(expression)
    if compiled.program is None:
        return CelOutcome(False, compiled.error)
    try:
        result = compiled.program.evaluate(activation)
    except Exception as exc:  # evaluation errors are raised as CELEvalError and kin
        return CelOutcome(False, f"runtime error: {_describe(exc)}")
    if isinstance(result, Exception):
        return CelOutcome(False, f"runtime error: {_describe(result)}")
    if not isinstance(result, celtypes.BoolType):
        return CelOutcome(False, f"expression must return a bool, got {type(result).__name__}")
    return CelOutcome(bool(result))


def _describe(exc: BaseException) -> str:
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return type(exc).__name__


class SelectorCache:
    """Selector outcomes by (expression, device fingerprint), bounded in size."""

    def __init__(self, *, max_entries: int = 100_000) -> None:
        self._results: dict[tuple[str, bytes], CelOutcome] = {}
        self._max = max_entries

    def __len__(self) -> int:
        return len(self._results)

    def get(self, expression: str, fingerprint: bytes) -> CelOutcome | None:
        return self._results.get((expression, fingerprint))

    def put(self, expression: str, fingerprint: bytes, outcome: CelOutcome) -> None:
        if len(self._results) >= self._max:
            self._results.clear()  # devices change rarely; starting over is cheap and simple
        self._results[(expression, fingerprint)] = outcome
