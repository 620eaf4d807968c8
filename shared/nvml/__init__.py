"""NVML access for the per-node services: a small typed interface and its pynvml implementation.

    nvml = PynvmlNvml()
    nvml.init()                                  # NvmlUnavailableError when NVML is missing
    fabric = [nvml.fabric_info(gpu) for gpu in range(nvml.device_count())]
    node_clique(fabric).clique                   # "<cluster uuid>.<clique id>" or None

    async with subscribed(nvml) as events:       # XIDs, double-bit ECC, recovery actions
        async for event in watch_events(events):
            ...

Everything returned is a frozen msgspec Struct (``model``); decisions over them are pure
functions (``clique``, ``placement``, ``fabric``). Every :class:`Nvml` method blocks, so async
code calls them through ``asyncio.to_thread``. The same code runs on a GPU node and against
``sim.nvml``, which replaces only the library object pynvml calls into.

Exceptions (``errors``)::

    NvmlError
    ├── NvmlUnavailableError  library or driver missing, not initialised
    ├── GpuLostError          a GPU fell off the bus (``gpus``)
    ├── NotSupportedError     the GPU or driver lacks the query
    ├── NvmlCallError         any other failure
    └── EventSetClosedError   a closed subscription was waited on
"""

from shared.nvml.backend import PynvmlNvml
from shared.nvml.clique import (
    CliqueGroup,
    CliqueStatus,
    NodeClique,
    clique_of,
    clique_string,
    node_clique,
)
from shared.nvml.errors import (
    EventSetClosedError,
    GpuLostError,
    NotSupportedError,
    NvmlCallError,
    NvmlError,
    NvmlUnavailableError,
)
from shared.nvml.events import PynvmlEventSubscription, subscribed, watch_events
from shared.nvml.fabric import HealthFault, HealthField, health_faults, health_field
from shared.nvml.interface import EventSubscription, Nvml
from shared.nvml.model import (
    DEFAULT_EVENT_TYPES,
    NVML_SUCCESS,
    DeviceEvent,
    EccErrorCounts,
    EventKind,
    EventType,
    FabricHealthSummary,
    FabricInfo,
    FabricState,
    GpuIdentity,
    NvLinkStates,
    PlatformInfo,
    RecoveryAction,
    RemappedRows,
)
from shared.nvml.placement import NodePlacement, node_placement

__all__ = [
    "DEFAULT_EVENT_TYPES",
    "NVML_SUCCESS",
    "CliqueGroup",
    "CliqueStatus",
    "DeviceEvent",
    "EccErrorCounts",
    "EventKind",
    "EventSetClosedError",
    "EventSubscription",
    "EventType",
    "FabricHealthSummary",
    "FabricInfo",
    "FabricState",
    "GpuIdentity",
    "GpuLostError",
    "HealthFault",
    "HealthField",
    "NodeClique",
    "NodePlacement",
    "NotSupportedError",
    "NvLinkStates",
    "Nvml",
    "NvmlCallError",
    "NvmlError",
    "NvmlUnavailableError",
    "PlatformInfo",
    "PynvmlEventSubscription",
    "PynvmlNvml",
    "RecoveryAction",
    "RemappedRows",
    "clique_of",
    "clique_string",
    "health_faults",
    "health_field",
    "node_clique",
    "node_placement",
    "subscribed",
    "watch_events",
]
