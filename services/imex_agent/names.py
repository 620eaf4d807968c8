"""Names the IMEX agent writes and others read: annotations, reasons, CDI and environment names.

The names shared with other services (driver, labels, the node condition) live in
:mod:`shared.crds.names`; these are the agent's own.
"""

from __future__ import annotations

COMPONENT = "imex-agent"

# -- what each agent publishes on its own Node (it is the only writer of these) ----------------
ADDRESS_ANNOTATION = "cdo.dev/imex-address"
"""The address this node's IMEX daemon binds to and its peers reach it on."""
SLOT_ANNOTATION = "cdo.dev/imex-slot"
"""The node's IMEX slot in its clique: its line in nodes_config.cfg is ordered by it."""
SLOT_SOURCE_ANNOTATION = "cdo.dev/imex-slot-source"
"""``platform`` (tray index from NVML platform info) or ``claimed`` (no platform info)."""
CLIQUE_ANNOTATION = "cdo.dev/imex-clique"
"""The clique the three annotations above were written for; others are ignored."""

SLOT_SOURCE_PLATFORM = "platform"
SLOT_SOURCE_CLAIMED = "claimed"

# -- node condition reasons (condition cdo.dev/ImexReady) --------------------------------------
REASON_READY = "ImexReady"
REASON_NO_CLIQUE = "NoClique"
REASON_NOT_IN_ROSTER = "NotInRoster"
REASON_FOREIGN_DAEMON = "ForeignImexDaemon"
REASON_NOT_RUNNING = "NotRunning"
REASON_NOT_READY = "DaemonNotReady"
REASON_PROGRAMS_MISSING = "ImexProgramsMissing"

# -- CDI ---------------------------------------------------------------------------------------
CDI_VERSION = "0.6.0"
CDI_VENDOR = "cdo.dev"
CDI_CLASS = "imex-channel"
CDI_KIND = f"{CDI_VENDOR}/{CDI_CLASS}"
CDI_FILE_PREFIX = f"{CDI_VENDOR}-{CDI_CLASS}_"
"""Spec files are ``<cdi root>/cdo.dev-imex-channel_<claim uid>.json``."""

CHANNEL_CONTAINER_DIR = "/dev/nvidia-caps-imex-channels"
"""Where a container sees its channel device, whatever the host's device root is."""
CHANNEL_DEVICE_NAME = "nvidia-caps-imex-channels"
"""The character device's name in /proc/devices (its major number)."""

# -- environment a prepared claim gives its containers (docs/imex-agent.md has the table) -------
ENV_DOMAIN = "CDO_COMPUTE_DOMAIN"
"""``<namespace>/<name>`` of the ComputeDomain."""
ENV_DOMAIN_UID = "CDO_COMPUTE_DOMAIN_UID"
ENV_CHANNEL = "CDO_IMEX_CHANNEL"
"""The IMEX channel number: the pod's device is ``channel<N>``."""
ENV_CLIQUE = "CDO_CLIQUE_ID"
"""The clique of the pod's slice, ``<cluster UUID>.<clique id>``."""
ENV_SLICE_INDEX = "CDO_SLICE_INDEX"
ENV_SLICE_SIZE = "CDO_SLICE_SIZE"
"""Ranks the pod's slice covers."""
ENV_SLICE_RANK = "CDO_SLICE_RANK"
"""The pod's rank in its slice (its rank in the gang minus the slice's first rank)."""
ENV_RANK = "CDO_RANK"
"""The pod's rank in the gang."""

# NVIDIA's names (kubernetes-sigs/dra-driver-nvidia-gpu), same values, for existing scripts.
NVIDIA_ENV_CLIQUE = "CLIQUE_ID"
NVIDIA_ENV_DOMAIN_UID = "COMPUTE_DOMAIN_UUID"
NVIDIA_ENV_DOMAIN_NAME = "COMPUTE_DOMAIN_NAME"
NVIDIA_ENV_DOMAIN_NAMESPACE = "COMPUTE_DOMAIN_NAMESPACE"

# -- the node's ResourceSlice --------------------------------------------------------------------
ATTACHMENT_PREFIX = "attach-"
"""Attachment devices are ``attach-0`` .. ``attach-<N-1>``."""
