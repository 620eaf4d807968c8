"""What can go wrong when reading NVML, as a few exceptions callers can act on.

NvmlError                 any NVML failure; ``code`` is the NVML_ERROR_* value when known
├── NvmlUnavailableError  the library or driver is missing or not initialised: nothing can be read
├── GpuLostError          a GPU fell off the bus; ``gpus`` names the lost GPU indices
├── NotSupportedError     this GPU or driver does not offer the query
├── NvmlCallError         any other return code of a call
└── EventSetClosedError   an event subscription was used after it was closed
"""

from __future__ import annotations

from shared.errors import CdoError


class NvmlError(CdoError):
    """An NVML call failed. ``code`` is NVML's return code when one was returned."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class NvmlUnavailableError(NvmlError):
    """NVML cannot be used at all: library not found, driver not loaded, not initialised."""


class GpuLostError(NvmlError):
    """One or more GPUs fell off the bus (NVML_ERROR_GPU_IS_LOST)."""

    def __init__(self, message: str, *, gpus: tuple[int, ...], code: int | None = None) -> None:
        super().__init__(message, code=code)
        self.gpus = gpus


class NotSupportedError(NvmlError):
    """The GPU or the installed driver does not offer this query."""


class NvmlCallError(NvmlError):
    """Any other failure of an NVML call."""


class EventSetClosedError(NvmlError):
    """An event subscription was waited on after it was closed."""
