"""Deterministic identifiers for simulated hardware.

Every identifier is a pure function of names in the topology, so the same file always
yields the same cluster: a restarted simulator finds its nodes, GPUs and cliques unchanged,
as a real cluster would after a reboot.
"""

from __future__ import annotations

import ipaddress
import uuid

# A fixed namespace keeps the derived UUIDs stable across versions of this code.
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "sim.cdo.invalid")

# Compute trays above the switch trays, then below them: an NVL72 has 10 compute trays,
# 9 NVLink switch trays, then 8 compute trays, and slot numbers count every tray.
_UPPER_COMPUTE_TRAYS = 10
_SWITCH_TRAYS = 9

# A GB200 tray's four GPUs sit in PCI domains 0x8, 0x9, 0x18 and 0x19; larger trays continue
# the pattern (two GPUs per 0x10 block).
_GPUS_PER_DOMAIN_BLOCK = 2
_DOMAIN_BLOCK_STRIDE = 0x10
_FIRST_DOMAIN = 0x8


def _derived(*parts: str) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE, "/".join(parts))


def cluster_uuid(*, topology: str, rack: str) -> str:
    """The clusterUuid of a rack's NVLink domain, in canonical form."""
    return str(_derived("cluster", topology, rack))


def gpu_uuid(*, topology: str, node: str, index: int) -> str:
    """A GPU UUID in the form nvmlDeviceGetUUID returns (``GPU-`` and a canonical UUID)."""
    return f"GPU-{_derived('gpu', topology, node, str(index))}"


def gpu_serial(*, topology: str, node: str, index: int) -> str:
    """A 13-digit board serial number, as GB200 boards report."""
    return f"{_derived('serial', topology, node, str(index)).int % 10**13:013d}"


def chassis_serial(*, topology: str, rack: str) -> str:
    """A 13-character chassis serial number (Blackwell reports 13 bytes)."""
    return f"{_derived('chassis', topology, rack).int % 10**13:013d}"


def ib_guid(*, topology: str, node: str, index: int) -> bytes:
    """An 8-byte InfiniBand GUID as Blackwell platform info reports it."""
    return _derived("ib-guid", topology, node, str(index)).bytes[:8]


def pci_bus_id(index: int) -> str:
    """The PCI bus id of a tray's GPU ``index`` ("00000008:01:00.0" for GPU 0)."""
    block, within = divmod(index, _GPUS_PER_DOMAIN_BLOCK)
    domain = _FIRST_DOMAIN + block * _DOMAIN_BLOCK_STRIDE + within
    return f"{domain:08X}:01:00.0"


def slot_number(tray_index: int) -> int:
    """The 1-based chassis slot of a compute tray, counting the switch trays in between."""
    if tray_index < _UPPER_COMPUTE_TRAYS:
        return tray_index + 1
    return tray_index + _SWITCH_TRAYS + 1


def node_address(*, base: ipaddress.IPv4Address, rack_index: int, tray_index: int) -> str:
    """``base`` + 256 per rack + tray + 1: rack r's tray t reads as x.y.r.(t+1) for a /16 base."""
    return str(base + 256 * rack_index + tray_index + 1)
