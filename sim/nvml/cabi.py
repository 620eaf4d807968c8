"""The C side of a ctypes call: reading arguments and writing results through pointers.

pynvml calls C symbols with ctypes values: ``byref(struct)``, ``c_uint(n)``, plain ints,
string buffers, ``c_char_p`` and opaque handle pointers. A simulated symbol receives exactly
those objects and must act on them as the C library would: read scalars by value, write
outputs into the caller's memory at the address a pointer argument carries. Structures
passed by value where C expects a pointer are refused, as the real call would misbehave.

Failures are raised as :class:`NvmlCallError` carrying an ``NVML_ERROR_*`` code; the library
dispatcher turns them into the return code.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pynvml

if TYPE_CHECKING:
    from _ctypes import _CData

_CArgObject = type(ctypes.byref(ctypes.c_int()))

CType = TypeVar("CType", bound="_CData")


class NvmlCallError(Exception):
    """A simulated call ends with ``code`` (an ``NVML_ERROR_*`` value) instead of success."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def invalid_argument() -> NvmlCallError:
    return NvmlCallError(pynvml.NVML_ERROR_INVALID_ARGUMENT)


def address_of(argument: object) -> int:
    """The address C receives for a pointer argument; NULL and non-pointers are refused."""
    if not isinstance(argument, _CArgObject | ctypes._Pointer | ctypes.Array):
        # Covers None (NULL), structures passed by value, ints and Python bytes.
        raise invalid_argument()
    address = ctypes.cast(argument, ctypes.c_void_p).value
    if not address:
        raise invalid_argument()
    return address


def pointer_value(argument: object) -> int:
    """The value of an opaque handle argument (a ctypes pointer), 0 for NULL."""
    if argument is None:
        return 0
    if not isinstance(argument, ctypes._Pointer):
        raise invalid_argument()
    return ctypes.cast(argument, ctypes.c_void_p).value or 0


def target(argument: object, ctype: type[CType]) -> CType:
    """The caller's ``ctype`` object a pointer argument points at, writable in place."""
    # typeshed declares from_address on each ctypes metaclass, not on a common base.
    factory: Any = ctype
    return cast(CType, factory.from_address(address_of(argument)))


def write_pointer(argument: object, value: int) -> None:
    """Store the pointer ``value`` where an out-parameter (``byref(handle)``) points."""
    target(argument, ctypes.c_void_p).value = value


def integer(argument: object) -> int:
    """A scalar argument passed by value: a Python int or a ctypes scalar."""
    if isinstance(argument, bool):
        raise invalid_argument()
    if isinstance(argument, int):
        return argument
    if isinstance(argument, ctypes._SimpleCData):
        value: Any = argument.value
        if isinstance(value, int):
            return value
    raise invalid_argument()


def c_string(argument: object) -> bytes:
    """A ``const char *`` input: ``c_char_p``, bytes or a char buffer."""
    if isinstance(argument, ctypes.c_char_p):
        value = argument.value
    elif isinstance(argument, bytes):
        value = argument
    elif isinstance(argument, ctypes.Array):
        value = ctypes.string_at(ctypes.addressof(argument))
    else:
        value = None
    if value is None:
        raise invalid_argument()
    return value


def write_c_string(buffer: object, length: object, text: str) -> None:
    """Copy ``text`` and its terminating NUL into a caller's ``char *`` of ``length`` bytes."""
    data = text.encode() + b"\0"
    if len(data) > integer(length):
        raise NvmlCallError(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
    ctypes.memmove(address_of(buffer), data, len(data))


def struct_version(argument: object) -> int:
    """The ``version`` member that leads every versioned NVML struct."""
    return target(argument, ctypes.c_uint).value
