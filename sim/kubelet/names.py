"""The names the simulated kubelet and the node lifecycle controller read and write.

Pod annotations of the simulator (``sim.cdo.dev/``):

- ``sim.cdo.dev/cdi-devices`` (written by the kubelet): JSON list of the fully qualified CDI
  device ids the DRA plugins returned for the pod's claims, in the order of
  ``spec.resourceClaims``, without repeats. A real kubelet hands these to the container
  runtime; here they are the observable result of NodePrepareResources.
- ``sim.cdo.dev/run-seconds`` (read; set it on a Job's pod template): the containers "exit"
  this many seconds (a decimal number) after the pod started running. Only for pods whose
  ``restartPolicy`` is not ``Always``; other pods run until deleted.
- ``sim.cdo.dev/exit-code`` (read): the exit code they exit with (default 0): 0 makes the pod
  ``Succeeded``, anything else ``Failed``.

Everything else is the upstream Kubernetes name for the same thing.
"""

from __future__ import annotations

from typing import Final

# -- pod annotations of the simulator --------------------------------------------------------

CDI_DEVICES_ANNOTATION: Final = "sim.cdo.dev/cdi-devices"
DEVICE_ENVS_ANNOTATION: Final = "sim.cdo.dev/device-envs"
"""JSON {container: {variable: value}}: the environment the device plugin's Allocate gave."""
RUN_SECONDS_ANNOTATION: Final = "sim.cdo.dev/run-seconds"
EXIT_CODE_ANNOTATION: Final = "sim.cdo.dev/exit-code"

# -- node labels the kubelet owns -------------------------------------------------------------

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
OS_LABEL: Final = "kubernetes.io/os"
ARCH_LABEL: Final = "kubernetes.io/arch"
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
BETA_OS_LABEL: Final = "beta.kubernetes.io/os"
BETA_ARCH_LABEL: Final = "beta.kubernetes.io/arch"

GPU_RESOURCE: Final = "nvidia.com/gpu"

# -- node heartbeat -----------------------------------------------------------------------------

NODE_LEASE_NAMESPACE: Final = "kube-node-lease"

# -- conditions ---------------------------------------------------------------------------------

READY: Final = "Ready"
MEMORY_PRESSURE: Final = "MemoryPressure"
DISK_PRESSURE: Final = "DiskPressure"
PID_PRESSURE: Final = "PIDPressure"
# The node conditions the kubelet reports (and the lifecycle controller sets to Unknown).
KUBELET_NODE_CONDITIONS: Final = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE, READY)

POD_SCHEDULED: Final = "PodScheduled"
POD_READY_TO_START_CONTAINERS: Final = "PodReadyToStartContainers"
INITIALIZED: Final = "Initialized"
CONTAINERS_READY: Final = "ContainersReady"
DISRUPTION_TARGET: Final = "DisruptionTarget"

# -- reasons (conditions and Events) --------------------------------------------------------------

REASON_KUBELET_READY: Final = "KubeletReady"
REASON_NODE_STATUS_UNKNOWN: Final = "NodeStatusUnknown"
REASON_NODE_NOT_READY: Final = "NodeNotReady"
REASON_NODE_READY: Final = "NodeReady"
REASON_FAILED_PREPARE: Final = "FailedPrepareDynamicResources"
REASON_FAILED_UNPREPARE: Final = "FailedUnprepareDynamicResources"
REASON_CONTAINERS_NOT_READY: Final = "ContainersNotReady"
REASON_POD_COMPLETED: Final = "PodCompleted"
REASON_TAINT_EVICTION: Final = "TaintManagerEviction"
REASON_DELETION_BY_TAINT_MANAGER: Final = "DeletionByTaintManager"

# -- taints the node lifecycle controller owns ----------------------------------------------------

TAINT_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_NOT_READY: Final = "node.kubernetes.io/not-ready"
NO_EXECUTE: Final = "NoExecute"
NO_SCHEDULE: Final = "NoSchedule"
LIFECYCLE_TAINT_KEYS: Final = (TAINT_UNREACHABLE, TAINT_NOT_READY)

# -- pod phases -----------------------------------------------------------------------------------

PENDING: Final = "Pending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
TERMINAL_PHASES: Final = (SUCCEEDED, FAILED)
