"""Small helpers for calling pynvml: error translation and raw reads of ctypes fields."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pynvml

from shared.nvml.errors import (
    GpuLostError,
    NotSupportedError,
    NvmlCallError,
    NvmlError,
    NvmlUnavailableError,
)

_UNAVAILABLE = frozenset(
    {
        pynvml.NVML_ERROR_UNINITIALIZED,
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    }
)
# A symbol missing from an older driver means the same as a query the GPU does not offer.
_NOT_SUPPORTED = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})


def describe(error: pynvml.NVMLError) -> str:
    return f"{error} (NVML error {error.value})"


def translate(error: pynvml.NVMLError, *, what: str, gpu: int | None = None) -> NvmlError:
    """The exception of ``shared.nvml.errors`` that stands for a pynvml error."""
    code = int(error.value)
    where = what if gpu is None else f"{what} on GPU {gpu}"
    message = f"{where}: {describe(error)}"
    if code == pynvml.NVML_ERROR_GPU_IS_LOST:
        return GpuLostError(message, gpus=() if gpu is None else (gpu,), code=code)
    if code in _UNAVAILABLE:
        return NvmlUnavailableError(message, code=code)
    if code in _NOT_SUPPORTED:
        return NotSupportedError(message, code=code)
    return NvmlCallError(message, code=code)


@contextmanager
def nvml_errors(what: str, *, gpu: int | None = None) -> Iterator[None]:
    """Re-raise pynvml errors of the block as ``shared.nvml.errors`` exceptions."""
    try:
        yield
    except pynvml.NVMLError as error:
        raise translate(error, what=what, gpu=gpu) from error


def raw_field(struct: Any, name: str) -> bytes:
    """A struct field's bytes as they sit in memory.

    pynvml decodes every ``bytes`` attribute of its structs as UTF-8 and ctypes cuts char
    arrays at the first NUL; platform fields hold binary values, so read the memory itself.
    """
    descriptor = getattr(type(struct), name)
    return ctypes.string_at(ctypes.addressof(struct) + descriptor.offset, descriptor.size)


def text(value: str | bytes) -> str:
    """pynvml returns str from most string getters, bytes from a few older ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def pointer_address(pointer: Any) -> int:
    """The address a ctypes pointer (a device handle) holds; 0 for NULL."""
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


_FIELD_VALUE_MEMBERS = {
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def field_value(entry: Any) -> int:
    """The integer in an nvmlFieldValue_t, read through the union member its type names."""
    member = _FIELD_VALUE_MEMBERS.get(entry.valueType)
    if member is None:
        return int(entry.value.dVal)
    return int(getattr(entry.value, member))
