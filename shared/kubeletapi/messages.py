"""The values exchanged over the kubelet gRPC contracts, as plain frozen Structs.

Only ``convert`` turns these into protobuf messages and back; everything else in cdo works with
these types.
"""

from __future__ import annotations

import msgspec


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """A ResourceClaim as the kubelet names it in prepare and unprepare calls."""

    namespace: str
    uid: str
    name: str


class PreparedDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One allocated device made ready for a claim, and how the runtime injects it."""

    pool_name: str
    device_name: str
    # Fully qualified CDI names, "vendor/class=name"; the kubelet hands them to the runtime.
    cdi_device_ids: tuple[str, ...] = ()
    # Requests of the claim this device serves; empty means every request.
    request_names: tuple[str, ...] = ()


class PrepareResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of preparing one claim: its devices, or an error (devices then ignored)."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def cdi_device_ids(self) -> tuple[str, ...]:
        """Every CDI device id of every device, in order, without repeats."""
        return tuple(dict.fromkeys(cdi for device in self.devices for cdi in device.cdi_device_ids))


class UnprepareResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of unpreparing one claim; an empty error means done."""

    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


class PluginInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a plugin answers to the kubelet's GetInfo on its registration socket."""

    plugin_type: str
    name: str
    # Socket path of the plugin's service; empty means the registration socket serves it.
    endpoint: str
    # For DRA, the gRPC services the endpoint serves ("v1.DRAPlugin" ...), preferred first.
    supported_versions: tuple[str, ...]


class RegistrationStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What the kubelet tells a plugin after trying to register it."""

    registered: bool
    error: str = ""
