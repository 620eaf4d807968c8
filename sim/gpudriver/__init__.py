"""NVIDIA's GPU DRA driver (``gpu.nvidia.com``) as the simulator runs it on a node.

On nodes whose rack says ``gpu_api: dra`` or ``both``, the node host runs a
:class:`GpuKubeletPlugin` next to cdo's services: it reads the node's GPUs from its simulated
NVML, publishes one device per GPU in the node's ResourceSlice (NVIDIA's names, attributes and
capacity), prepares claims over the kubelet's DRA gRPC service, and taints a GPU's device after
an XID. The ``gpu.nvidia.com`` DeviceClass is the cluster's (:mod:`sim.cluster` installs it, as
NVIDIA's Helm chart does). See docs/simulated-gpu-driver.md.
"""

from sim.gpudriver.deviceclass import device_class_manifest
from sim.gpudriver.driver import GpuDriver
from sim.gpudriver.inventory import GpuRecord, device_body, read_gpus
from sim.gpudriver.plugin import GpuKubeletPlugin
from sim.gpudriver.taints import XID_TAINT, TaintLedger

__all__ = [
    "XID_TAINT",
    "GpuDriver",
    "GpuKubeletPlugin",
    "GpuRecord",
    "TaintLedger",
    "device_body",
    "device_class_manifest",
    "read_gpus",
]
