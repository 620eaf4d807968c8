"""The node's GPUs as NVIDIA's GPU DRA driver reads them from NVML, and the devices it publishes.

:func:`read_gpus` asks NVML (pynvml, so the simulated NVML of the node it runs for) what the
driver asks at start: per GPU its minor number, index, UUID, product name, brand, architecture,
CUDA compute capability, PCI bus id and memory, and for the node the driver and CUDA driver
versions. :func:`device_body` turns one GPU into the ResourceSlice device the driver publishes:
named ``gpu-<minor>``, with the attributes and the ``memory`` capacity NVIDIA's driver gives a
whole GPU (docs/simulated-gpu-driver.md lists them and their sources). Versions are semantic
versions, as the API requires of version attributes.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pynvml

from shared.crds.names import GPU_DEVICE_TYPE, gpu_device_name

# How NVIDIA's driver (through go-nvlib) names NVML's brand and architecture enums.
_BRANDS = {pynvml.NVML_BRAND_NVIDIA: "Nvidia", pynvml.NVML_BRAND_TESLA: "Tesla"}
_ARCHITECTURES = {
    pynvml.NVML_DEVICE_ARCH_HOPPER: "Hopper",
    pynvml.NVML_DEVICE_ARCH_BLACKWELL: "Blackwell",
}


class GpuRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What the driver knows of one GPU."""

    index: int
    minor: int
    uuid: str
    product_name: str
    brand: str
    architecture: str
    cuda_compute_capability: str
    driver_version: str
    cuda_driver_version: str
    pci_bus_id: str
    memory_bytes: int

    @property
    def device(self) -> str:
        return device_name(self.minor)


def device_name(minor: int) -> str:
    """The published name of the GPU with this minor number (``/dev/nvidia<minor>``; NVIDIA's
    driver names devices by minor, which equals the NVML index on these nodes)."""
    return gpu_device_name(minor)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def semantic(version: str) -> str:
    """``version`` as a semantic version: "10.0" -> "10.0.0", "570.133.20" unchanged."""
    parts = version.split(".")
    return ".".join([*parts, *["0"] * (3 - len(parts))][:3])


def read_gpus() -> tuple[GpuRecord, ...]:
    """Blocking: every GPU of the node, from NVML (initialised and shut down here)."""
    pynvml.nvmlInit()
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
        return tuple(
            _read_gpu(index, driver=driver, cuda=cuda_version)
            for index in range(pynvml.nvmlDeviceGetCount())
        )
    finally:
        pynvml.nvmlShutdown()


def _read_gpu(index: int, *, driver: str, cuda: str) -> GpuRecord:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    brand = pynvml.nvmlDeviceGetBrand(handle)
    architecture = pynvml.nvmlDeviceGetArchitecture(handle)
    return GpuRecord(
        index=index,
        minor=pynvml.nvmlDeviceGetMinorNumber(handle),
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        product_name=_text(pynvml.nvmlDeviceGetName(handle)),
        brand=_BRANDS.get(brand, "Unknown"),
        architecture=_ARCHITECTURES.get(architecture, "Unknown"),
        cuda_compute_capability=f"{major}.{minor}",
        driver_version=driver,
        cuda_driver_version=cuda,
        pci_bus_id=_text(pynvml.nvmlDeviceGetPciInfo_v3(handle).busId),
        memory_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
    )


def device_body(gpu: GpuRecord, *, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ResourceSlice device of ``gpu`` (with ``taints`` when it has any)."""
    body: dict[str, Any] = {
        "name": gpu.device,
        "attributes": {
            "type": {"string": GPU_DEVICE_TYPE},
            "uuid": {"string": gpu.uuid},
            "index": {"int": gpu.index},
            "minor": {"int": gpu.minor},
            "productName": {"string": gpu.product_name},
            "brand": {"string": gpu.brand},
            "architecture": {"string": gpu.architecture},
            "cudaComputeCapability": {"version": semantic(gpu.cuda_compute_capability)},
            "driverVersion": {"version": semantic(gpu.driver_version)},
            "cudaDriverVersion": {"version": semantic(gpu.cuda_driver_version)},
            "pcieBusID": {"string": gpu.pci_bus_id.lower()},
        },
        "capacity": {"memory": {"value": str(gpu.memory_bytes)}},
    }
    if taints:
        body["taints"] = taints
    return body
