"""The fabric health mask: NVML packs several small enums into one uint32 of fabric info.

Each sub-field sits at a shift with a width (NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_* / _WIDTH_*).
Value 0 always means the driver does not report that sub-field. :func:`health_faults` lists
the sub-fields whose value reports a problem, which is all the health monitor classifies.
"""

from __future__ import annotations

import enum

import msgspec

# Values of the yes/no sub-fields (degraded bandwidth, route recovery, route unhealthy,
# access timeout recovery, partition assigned).
NOT_SUPPORTED = 0
TRUE = 1
FALSE = 2


class HealthField(enum.Enum):
    """A sub-field of the fabric health mask; the value is (shift, width mask)."""

    DEGRADED_BW = (0, 0x3)
    ROUTE_RECOVERY = (2, 0x3)
    ROUTE_UNHEALTHY = (4, 0x3)
    ACCESS_TIMEOUT_RECOVERY = (6, 0x3)
    INCORRECT_CONFIGURATION = (8, 0xF)
    PARTITION_ASSIGNED = (12, 0x3)
    GFM_STATE = (14, 0x3)

    @property
    def shift(self) -> int:
        return int(self.value[0])

    @property
    def width(self) -> int:
        return int(self.value[1])


class IncorrectConfiguration(enum.IntEnum):
    """Values of the INCORRECT_CONFIGURATION sub-field."""

    NOT_SUPPORTED = 0
    NONE = 1
    INCORRECT_SYSGUID = 2
    INCORRECT_CHASSIS_SN = 3
    NO_PARTITION = 4
    INSUFFICIENT_NVLINKS = 5
    INCOMPATIBLE_GPU_FW = 6
    INVALID_LOCATION = 7
    GPU_STATE_INVALID = 8


class GfmState(enum.IntEnum):
    """Values of the GFM_STATE sub-field: is the global fabric manager connected."""

    NOT_SUPPORTED = 0
    CONNECTED = 1
    DISCONNECTED = 2


# For every sub-field, the values that report a problem.
_FAULTY: dict[HealthField, frozenset[int]] = {
    HealthField.DEGRADED_BW: frozenset({TRUE}),
    HealthField.ROUTE_RECOVERY: frozenset({TRUE}),
    HealthField.ROUTE_UNHEALTHY: frozenset({TRUE}),
    HealthField.ACCESS_TIMEOUT_RECOVERY: frozenset({TRUE}),
    HealthField.INCORRECT_CONFIGURATION: frozenset(
        value
        for value in range(HealthField.INCORRECT_CONFIGURATION.width + 1)
        if value not in (IncorrectConfiguration.NOT_SUPPORTED, IncorrectConfiguration.NONE)
    ),
    HealthField.PARTITION_ASSIGNED: frozenset({FALSE}),
    HealthField.GFM_STATE: frozenset({GfmState.DISCONNECTED}),
}


class HealthFault(msgspec.Struct, frozen=True, kw_only=True):
    """One sub-field of the mask that reports a problem, and its raw value."""

    field: HealthField
    value: int


def health_field(mask: int, field: HealthField) -> int:
    """The value of ``field`` inside ``mask`` (NVML's NVML_GPU_FABRIC_HEALTH_GET)."""
    return (mask >> field.shift) & field.width


def health_faults(mask: int) -> tuple[HealthFault, ...]:
    """The sub-fields of ``mask`` that report a problem, in mask order."""
    faults = []
    for field in HealthField:
        value = health_field(mask, field)
        if value in _FAULTY[field]:
            faults.append(HealthFault(field=field, value=value))
    return tuple(faults)


def describe_value(field: HealthField, value: int) -> str:
    """A readable name for one sub-field value, e.g. ``NO_PARTITION`` or ``TRUE``."""
    named: type[enum.IntEnum] | None = {
        HealthField.INCORRECT_CONFIGURATION: IncorrectConfiguration,
        HealthField.GFM_STATE: GfmState,
    }.get(field)
    if named is not None:
        try:
            return named(value).name
        except ValueError:
            return str(value)
    return {NOT_SUPPORTED: "NOT_SUPPORTED", TRUE: "TRUE", FALSE: "FALSE"}.get(value, str(value))
