"""Simulated NVML that pynvml itself drives: one simulated library per node, many per process.

How it plugs in
    pynvml (``nvidia-ml-py``) loads ``libnvidia-ml.so.1`` into the module global
    ``pynvml.nvmlLib`` and looks up every C function by name on it. :func:`install` puts a
    :class:`SimulatedLibrary` there instead; its attributes take the ctypes arguments pynvml
    passes (``byref`` structs, ``c_uint``, buffers, handle pointers), fill outputs through
    those pointers and return ``NVML_*`` return codes. pynvml's own wrappers, struct classes,
    version constants and ``NVMLError`` subclasses therefore run unchanged, and the consumer
    code is the same code that runs against the real library on a GPU node. A symbol the
    simulation lacks fails lookup, so pynvml raises ``NVMLError_FunctionNotFound``.

One library per node, many nodes per process
    pynvml holds one library per process, but a simulator hosts many nodes. Each node gets a
    :class:`SimulatedNvml` (its GPUs, event sets and faults). Every call into the installed
    library is routed to the node selected for the *calling context* through a
    :class:`contextvars.ContextVar`::

        nvml = SimulatedNvml(cluster.node("rack-0-tray00"))
        with bind(nvml):                       # installs the library on first use
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    asyncio tasks created and ``asyncio.to_thread`` calls made inside a ``bind`` block run in
    a copy of the context, so a per-node service started there keeps talking to its node for
    its whole life, threads included. :func:`bound_context` gives a context to start code
    from outside a block (``asyncio.create_task(coro, context=ctx)``, ``ctx.run`` as a
    thread target). A call with no node selected raises :class:`NoNodeSelectedError`.

Threads
    Each node has one lock; every simulated call runs under it and fault injection takes it
    too, so faults may be injected from any thread. ``nvmlEventSetWait_v2`` sleeps on the
    node's condition (releasing the lock) until an event, a fault or its timeout.

Fault injection (methods of :class:`SimulatedNvml`, GPUs by index)
    ``raise_xid``, ``set_gpu_lost``, ``drop_nvlink`` / ``restore_nvlink`` /
    ``set_nvlink_active``, ``add_nvlink_errors``, ``set_fabric`` / ``set_fabric_health`` /
    ``reset_fabric``, ``add_ecc_errors`` / ``clear_ecc_errors``, ``set_remapped_rows`` /
    ``clear_remapped_rows``, ``set_recovery_action``, ``set_fabric_info_v3_supported``,
    ``set_unavailable`` / ``set_available`` and ``clear_faults``.

What is faithful and what is simplified is listed in ``docs/simulated-nvml.md``.
"""

from sim.nvml.fabric import HEALTHY_MASK, HealthField, compose_health_mask, health_field
from sim.nvml.library import (
    LIBRARY,
    NoNodeSelectedError,
    SimulatedLibrary,
    bind,
    bound_context,
    current_nvml,
    install,
    is_installed,
    uninstall,
)
from sim.nvml.node import SUPPORTED_EVENT_TYPES, SimulatedNvml
from sim.nvml.state import NVLINKS_PER_GPU

__all__ = [
    "HEALTHY_MASK",
    "LIBRARY",
    "NVLINKS_PER_GPU",
    "SUPPORTED_EVENT_TYPES",
    "HealthField",
    "NoNodeSelectedError",
    "SimulatedLibrary",
    "SimulatedNvml",
    "bind",
    "bound_context",
    "compose_health_mask",
    "current_nvml",
    "health_field",
    "install",
    "is_installed",
    "uninstall",
]
