"""The agent's look at its node's container runtime, reported as ``cdo.dev/CdiEnabled``.

At start and every ``CDO_IMEX_AGENT_RUNTIME_INTERVAL_S`` (and at once after :meth:`poke`) it
reads its own Node (the runtime and its version) and, where
``CDO_IMEX_AGENT_RUNTIME_CONFIG_ROOT`` is set, containerd's configuration below that root;
:func:`~services.imex_agent.cdicheck.cdi_finding` decides, and the condition is written (a
strategic merge patch of the Node's status, which leaves the other conditions alone) when its
status, reason or message changes. A runtime without CDI is logged as an error once per
change. Nothing else changes: the agent still prepares claims, since the kubelet, not the
agent, hands the CDI ids to the runtime.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from services.imex_agent.cdicheck import (
    CONTAINERD_CONFIG,
    ConfigFile,
    RuntimeFacts,
    cdi_finding,
    imports_of,
)
from services.imex_agent.settings import RuntimeCheckSettings
from services.imex_agent.status import ConditionValue, condition_patch
from shared.crds.names import CDI_ENABLED_CONDITION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import NODES

log = logging.getLogger("cdo.imex_agent.runtime")

_node_decoder = msgspec.json.Decoder(Node)


def _read(root: Path, host_path: str) -> ConfigFile:
    try:
        return ConfigFile(path=host_path, text=(root / host_path.lstrip("/")).read_text())
    except OSError as exc:
        return ConfigFile(path=host_path, error=exc.strerror or str(exc))


def read_containerd_config(root: Path) -> tuple[ConfigFile, ...]:
    """containerd's configuration as the host has it, seen below ``root``: the main file, then
    the files its ``imports`` name (globs; a relative one is relative to the main file's
    directory), in order. Blocking."""
    main = _read(root, CONTAINERD_CONFIG)
    files = [main]
    if main.text is None:
        return tuple(files)
    try:
        imported = imports_of(tomllib.loads(main.text))
    except tomllib.TOMLDecodeError:
        return tuple(files)  # the finding names the parse error
    base = Path(CONTAINERD_CONFIG).parent
    for pattern in imported:
        host_pattern = pattern if pattern.startswith("/") else str(base / pattern)
        matches = sorted(glob.glob(str(root / host_pattern.lstrip("/"))))
        if not matches and not glob.has_magic(host_pattern):
            files.append(_read(root, host_pattern))
        for match in matches:
            files.append(_read(root, "/" + str(Path(match).relative_to(root))))
    return tuple(files)


class RuntimeCheck:
    """Writes ``cdo.dev/CdiEnabled`` on the agent's own Node; see the module docstring."""

    def __init__(self, *, node: str, client: KubeClient, settings: RuntimeCheckSettings) -> None:
        self._node = node
        self._client = client
        self._settings = settings
        self._wake = asyncio.Event()
        self.finding: ConditionValue | None = None
        self._written: ConditionValue | None = None
        self._transition = datetime.now(UTC)

    def poke(self) -> None:
        """Look again now (the node's runtime configuration changed)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            await self.check_once()
            try:
                async with asyncio.timeout(self._settings.interval_s):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def facts(self) -> RuntimeFacts:
        raw = await self._client.get(NODES, self._node)
        node = _node_decoder.decode(raw)
        if self._written is None and (seen := node.condition(CDI_ENABLED_CONDITION)) is not None:
            # What an earlier agent wrote: keep its transition time while nothing changes.
            self._written = ConditionValue(
                status=seen.status, reason=seen.reason, message=seen.message
            )
            self._transition = seen.last_transition_time or self._transition
        root = self._settings.config_root
        config = await asyncio.to_thread(read_containerd_config, Path(root)) if root else ()
        return RuntimeFacts(
            runtime_version=node.status.node_info.container_runtime_version, config=config
        )

    async def check_once(self) -> None:
        try:
            facts = await self.facts()
        except KubeApiError as exc:
            log.warning("cannot read this node's runtime", extra={"error": str(exc)})
            return
        finding = cdi_finding(facts)
        if finding != self.finding and finding.status != "True":
            # Off for sure is an error; not knowing is worth a warning.
            log.log(
                logging.ERROR if finding.status == "False" else logging.WARNING,
                "the container runtime may not inject CDI devices: pods would run without "
                "their IMEX channel",
                extra={"status": finding.status, "detail": finding.message},
            )
        self.finding = finding
        if finding == self._written:
            return
        now = datetime.now(UTC)
        if self._written is None or self._written.status != finding.status:
            self._transition = now
        patch = condition_patch(
            finding, transition=self._transition, now=now, condition_type=CDI_ENABLED_CONDITION
        )
        try:
            await self._client.patch(
                NODES, self._node, patch, subresource="status", patch_type="strategic"
            )
        except KubeApiError as exc:
            log.warning("cannot write the CdiEnabled condition", extra={"error": str(exc)})
            return
        self._written = finding
