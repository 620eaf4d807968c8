"""The kubelet's gRPC contracts for DRA drivers, both sides, over unix sockets.

Plugin side (the IMEX agent): ``KubeletPlugin`` serves a ``DraHandler`` on the DRA socket and
registers through the plugins_registry socket; ``KubeletPlugin.registered`` feeds readiness.

Kubelet side (the simulated kubelet): ``PluginWatcher`` discovers and registers plugins in a
plugins_registry directory; ``PluginWatcher.client(driver)`` calls them.

Both sides speak in the Structs of ``messages``; protobuf stays inside this package. The wire
contracts are the .proto files under ``proto/kubelet`` (see docs/kubelet-grpc.md).
"""

from shared.kubeletapi.admission import RegisteredPlugin, admit_plugin
from shared.kubeletapi.client import DraPluginClient
from shared.kubeletapi.dra_service import DraHandler
from shared.kubeletapi.errors import (
    KubeletApiError,
    PluginCallError,
    PluginNotRegisteredError,
    RegistrationRejectedError,
)
from shared.kubeletapi.messages import (
    Claim,
    PluginInfo,
    PreparedDevice,
    PrepareResult,
    RegistrationStatus,
    UnprepareResult,
)
from shared.kubeletapi.plugin import KubeletPlugin, PluginPaths
from shared.kubeletapi.versions import DRA_PLUGIN_TYPE, DRA_SERVICES, DRA_V1, DRA_V1BETA1
from shared.kubeletapi.watcher import PluginWatcher

__all__ = [
    "DRA_PLUGIN_TYPE",
    "DRA_SERVICES",
    "DRA_V1",
    "DRA_V1BETA1",
    "Claim",
    "DraHandler",
    "DraPluginClient",
    "KubeletApiError",
    "KubeletPlugin",
    "PluginCallError",
    "PluginInfo",
    "PluginNotRegisteredError",
    "PluginPaths",
    "PluginWatcher",
    "PrepareResult",
    "PreparedDevice",
    "RegisteredPlugin",
    "RegistrationRejectedError",
    "RegistrationStatus",
    "UnprepareResult",
    "admit_plugin",
]
