"""The plugin's checkpoint: which claims it prepared and which channel devices it made.

One JSON file, replaced atomically on every change (write, fsync, rename, fsync directory), so
after a crash it holds either the state before a change or after it. A claim is recorded
*before* its channel device and CDI spec are made, and dropped only *after* they are removed, so
whatever a crash leaves behind is named in the checkpoint and cleaned up by the next unprepare
or at start-up. ``channels`` lists every channel device the agent may have created and not yet
removed; the agent never removes a channel device it did not create.

A checkpoint that does not decode stops the plugin with an error instead of starting empty:
an empty start would forget prepared claims and leave their devices in place for good.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from services.imex_agent.cdi import SliceSeat
from services.imex_agent.files import atomic_write
from shared.errors import CdoError

VERSION = 1


class CheckpointError(CdoError):
    """The checkpoint file exists but cannot be read."""


class DeviceRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One allocated device of a claim, as the kubelet is told about it."""

    request: str
    pool: str
    device: str


class ClaimRecord(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    namespace: str
    name: str
    domain_namespace: str
    domain_name: str
    domain_uid: str
    channel: int
    devices: tuple[DeviceRecord, ...] = ()
    cdi_ids: tuple[str, ...] = ()
    seat: SliceSeat | None = None
    """The pod's slice and ranks, so a re-rendered CDI spec gives the same environment; absent
    in records of the previous release (their specs keep the environment they had)."""


class CheckpointData(msgspec.Struct, kw_only=True):
    version: int = VERSION
    claims: dict[str, ClaimRecord] = msgspec.field(default_factory=dict)
    channels: list[int] = msgspec.field(default_factory=list)

    def channels_in_use(self) -> set[int]:
        return {record.channel for record in self.claims.values()}


_decoder = msgspec.json.Decoder(CheckpointData)


class CheckpointStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> CheckpointData:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return CheckpointData()
        except OSError as exc:
            raise CheckpointError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        try:
            data = _decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CheckpointError(f"{self.path} is damaged: {exc}") from exc
        if data.version != VERSION:
            raise CheckpointError(
                f"{self.path} has version {data.version}; this agent reads version {VERSION}"
            )
        return data

    def save(self, data: CheckpointData) -> None:
        data.channels = sorted(set(data.channels))
        atomic_write(self.path, msgspec.json.encode(data), mode=0o600)
