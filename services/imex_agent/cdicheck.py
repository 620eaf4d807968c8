"""Whether the node's container runtime injects CDI devices: the facts, and the finding (pure).

A claim's IMEX channel reaches its container only through CDI: the agent answers the kubelet
with the CDI id of the claim's spec, the kubelet passes it to the runtime in the container's
CRI request, and a runtime with CDI off ignores it, so the pod runs without its channel and
nothing fails. The agent tells that in the node condition ``cdo.dev/CdiEnabled``
(:data:`shared.crds.names.CDI_ENABLED_CONDITION`), which ``cdo preflight`` reads.

What the agent reads, and why that:

- **the runtime and its version** from its own Node, ``status.nodeInfo.containerRuntimeVersion``
  (``containerd://1.7.27``, ``cri-o://1.31.2``), written by the kubelet from the runtime's CRI
  ``Version``: no privilege beyond reading its own Node, which it does anyway;
- **containerd's configuration file**, where ``enable_cdi`` is set, through a read-only
  ``hostPath`` of ``/etc/containerd`` (``CDO_IMEX_AGENT_RUNTIME_CONFIG_ROOT`` names where the
  host's root is seen, ``/host`` in the DaemonSet: the agent reads
  ``/host/etc/containerd/config.toml`` and the drop-in files its ``imports`` name below
  ``/etc/containerd``).

The runtime's CRI ``Status`` (what ``crictl info`` prints, ``enableCDI`` in its config) would say
it directly, but asking it needs the runtime's socket in the agent's pod, which controls every
container on the node: far more than the agent needs.

The defaults, from the Container Device Interface's "How to configure CDI"
(cncf-tags/container-device-interface, README) and containerd's release notes:

| runtime | CDI |
|---|---|
| CRI-O 1.23 and later | on (no switch) |
| containerd 2.0 and later | on unless ``enable_cdi = false`` |
| containerd 1.7 | off unless ``enable_cdi = true`` |
| containerd before 1.7 | none |

``enable_cdi`` sits in ``[plugins."io.containerd.grpc.v1.cri"]`` (configuration version 2,
containerd 1.x, still read by 2.x) or ``[plugins."io.containerd.cri.v1.runtime"]`` (version 3,
containerd 2.x); the last file (the main one, then its imports in order) that sets it wins.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from services.imex_agent.status import ConditionValue
from shared.crds.names import CDI_DISABLED, CDI_ENABLED, CDI_UNKNOWN

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
_CRI_SECTIONS = ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")
_VERSION = re.compile(r"v?(\d+)\.(\d+)")


class ConfigFile(msgspec.Struct, frozen=True, kw_only=True):
    """One runtime configuration file as read: its host path and text, or why it was not."""

    path: str
    text: str | None = None
    error: str = ""


class RuntimeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the agent knows about its node's container runtime."""

    runtime_version: str
    """``status.nodeInfo.containerRuntimeVersion`` of the node."""
    config: tuple[ConfigFile, ...] = ()
    """containerd's configuration files in merge order; empty when none was read."""


def parse_runtime(version: str) -> tuple[str, tuple[int, int] | None]:
    """``containerd://v2.1.4`` -> ("containerd", (2, 1)); the version None when unreadable."""
    name, _, rest = version.partition("://")
    match = _VERSION.match(rest)
    return name.lower(), ((int(match[1]), int(match[2])) if match else None)


def enable_cdi(document: Mapping[str, Any]) -> bool | None:
    """``enable_cdi`` of one containerd configuration document, None when it sets none."""
    plugins = document.get("plugins")
    if not isinstance(plugins, dict):
        return None
    for section in _CRI_SECTIONS:
        value = (plugins.get(section) or {}).get("enable_cdi")
        if isinstance(value, bool):
            return value
    return None


def imports_of(document: Mapping[str, Any]) -> list[str]:
    """The drop-in paths (globs) a containerd configuration imports."""
    value = document.get("imports")
    return [str(item) for item in value] if isinstance(value, list) else []


def _setting(files: Sequence[ConfigFile]) -> tuple[bool | None, str, str]:
    """(enable_cdi, the file that set it, an error) over the files in merge order."""
    found: bool | None = None
    where = ""
    for file in files:
        if file.text is None:
            continue
        try:
            document = tomllib.loads(file.text)
        except tomllib.TOMLDecodeError as exc:
            return None, "", f"{file.path} is not TOML: {exc}"
        value = enable_cdi(document)
        if value is not None:
            found, where = value, file.path
    return found, where, ""


def cdi_finding(facts: RuntimeFacts) -> ConditionValue:
    """The ``cdo.dev/CdiEnabled`` condition for ``facts`` (the table in the module docstring)."""
    runtime, version = parse_runtime(facts.runtime_version)
    shown = facts.runtime_version or "an unnamed runtime"
    if runtime == "cri-o":
        if version is not None and version >= (1, 23):
            return _value(True, f"{shown}: CRI-O enables CDI from 1.23 on")
        return _value(False, f"{shown}: CRI-O enables CDI from 1.23 on; upgrade CRI-O")
    if runtime != "containerd" or version is None:
        return ConditionValue(
            status="Unknown",
            reason=CDI_UNKNOWN,
            message=f"{shown}: cdo cannot tell whether this runtime injects CDI devices; "
            "check that it does (containerd 2.x and CRI-O 1.23+ do by default)",
        )
    if version < (1, 7):
        return _value(False, f"{shown}: containerd before 1.7 has no CDI; upgrade to 2.x")
    setting, where, error = _setting(facts.config)
    if error:
        return ConditionValue(status="Unknown", reason=CDI_UNKNOWN, message=f"{shown}: {error}")
    if setting is not None:
        state = "true" if setting else "false"
        hint = "" if setting else "; set it to true (or remove it) and restart containerd"
        return _value(setting, f"{shown}: enable_cdi = {state} in {where}{hint}")
    read = [file.path for file in facts.config if file.text is not None]
    unread = [f"{file.path} ({file.error})" for file in facts.config if file.text is None]
    if version >= (2, 0):
        said = f"; {', '.join(read)} leaves it on" if read else ""
        return _value(True, f"{shown}: containerd 2.x enables CDI by default{said}")
    if not read:
        why = f" ({'; '.join(unread)})" if unread else ""
        return ConditionValue(
            status="Unknown",
            reason=CDI_UNKNOWN,
            message=f"{shown}: containerd 1.7 enables CDI only with enable_cdi = true, and the "
            f"agent could not read {CONTAINERD_CONFIG}{why}: mount /etc/containerd into the "
            "agent (CDO_IMEX_AGENT_RUNTIME_CONFIG_ROOT)",
        )
    return _value(
        False,
        f"{shown}: containerd 1.7 enables CDI only with enable_cdi = true in "
        f'[plugins."io.containerd.grpc.v1.cri"]; {", ".join(read)} does not set it: set it and '
        "restart containerd",
    )


def _value(enabled: bool, message: str) -> ConditionValue:
    if enabled:
        return ConditionValue(status="True", reason=CDI_ENABLED, message=message)
    return ConditionValue(status="False", reason=CDI_DISABLED, message=message)
