"""IMEX channel device nodes: ``<device root>/channel<N>``, character devices (major, N).

The major number is the one ``/proc/devices`` lists for ``nvidia-caps-imex-channels`` (or set
explicitly). Two modes, chosen by setting, never by accident:

- ``mknod``: real character devices, as a GPU node needs (the agent needs CAP_MKNOD). A failure
  to create one is an error naming the fix; nothing falls back silently.
- ``placeholder``: a regular file per channel holding ``c <major>:<minor>``, for simulations
  that run without the privilege. The CDI spec carries the device's type, major and minor
  either way, so a container runtime does not depend on the host file.

The agent removes only channels it created itself (the checkpoint records them), so devices
made by other tooling on the host are left alone.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from services.imex_agent.files import atomic_write, remove
from services.imex_agent.names import CHANNEL_DEVICE_NAME
from services.imex_agent.settings import DeviceMode, DraSettings
from shared.crds.names import MAX_CHANNELS
from shared.errors import CdoError

_CHANNEL_FILE = re.compile(r"^channel(\d+)$")


class ChannelDeviceError(CdoError):
    """A channel device cannot be created or its major number is unknown."""


def parse_major(text: str, name: str = CHANNEL_DEVICE_NAME) -> int | None:
    """The major number of character device ``name`` in the text of /proc/devices."""
    character = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":"):
            character = stripped == "Character devices:"
            continue
        if not character:
            continue
        number, _, device = stripped.partition(" ")
        if device.strip() == name and number.isdigit():
            return int(number)
    return None


def resolve_major(settings: DraSettings) -> int:
    """The channel device's major number from the settings or /proc/devices."""
    if settings.device_major >= 0:
        return settings.device_major
    path = Path(settings.proc_devices)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ChannelDeviceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    major = parse_major(text)
    if major is None:
        raise ChannelDeviceError(
            f"{path} lists no {CHANNEL_DEVICE_NAME} character device: is the NVIDIA driver "
            "loaded with IMEX channel support? (or set CDO_IMEX_AGENT_DRA_DEVICE_MAJOR)"
        )
    return major


def check_channel(channel: int) -> None:
    if not 0 <= channel < MAX_CHANNELS:
        raise ChannelDeviceError(f"channel {channel} is outside 0..{MAX_CHANNELS - 1}")


class ChannelDevices:
    """The channel device nodes under one root directory."""

    def __init__(self, *, root: Path, major: int, mode: DeviceMode) -> None:
        self.root = root
        self.major = major
        self.mode = mode

    def path(self, channel: int) -> Path:
        return self.root / f"channel{channel}"

    def present(self) -> set[int]:
        """Channels that have a file under the root now."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return set()
        found = set()
        for name in names:
            match = _CHANNEL_FILE.match(name)
            if match:
                found.add(int(match.group(1)))
        return found

    def ensure(self, channel: int) -> bool:
        """Make the channel's device exist with the right identity; True when (re)created."""
        check_channel(channel)
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path(channel)
        if self.mode == "placeholder":
            return self._ensure_placeholder(path, channel)
        return self._ensure_node(path, channel)

    def _ensure_placeholder(self, path: Path, channel: int) -> bool:
        content = f"c {self.major}:{channel}\n".encode()
        try:
            if path.read_bytes() == content:
                return False
        except FileNotFoundError:
            pass
        atomic_write(path, content, mode=0o666)
        return True

    def _ensure_node(self, path: Path, channel: int) -> bool:
        wanted = os.makedev(self.major, channel)
        try:
            info = path.lstat()
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISCHR(info.st_mode) and info.st_rdev == wanted:
                return False
            path.unlink()
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, wanted)
        except PermissionError as exc:
            raise ChannelDeviceError(
                f"cannot create character device {path} ({self.major}:{channel}): "
                f"{exc.strerror}; the agent needs CAP_MKNOD (or, in a simulation, "
                "CDO_IMEX_AGENT_DRA_DEVICE_MODE=placeholder)"
            ) from exc
        except OSError as exc:
            raise ChannelDeviceError(f"cannot create {path}: {exc.strerror or exc}") from exc
        # mknod's mode is filtered by the umask; the channel must be usable by the container.
        os.chmod(path, 0o666)
        return True

    def remove(self, channel: int) -> bool:
        return remove(self.path(channel))
