"""Writing the files the agent owns: atomically, and only when their content changes."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data``: a reader sees the old or the new file, never a mix.

    The data is written to a temporary file in the same directory, flushed to disk, renamed
    over ``path``, and the directory is synced so that the rename survives a power loss.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory; the rename is still atomic
    finally:
        os.close(fd)


def holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` exists with exactly ``data`` (then there is nothing to write)."""
    try:
        return path.read_bytes() == data
    except FileNotFoundError:
        return False


def write_bytes_if_changed(path: Path, data: bytes) -> bool:
    """Atomically write ``data`` unless the file already holds it; True when written."""
    if holds(path, data):
        return False
    atomic_write(path, data)
    return True


def write_if_changed(path: Path, text: str) -> bool:
    """Atomically write ``text`` unless the file already holds it; True when written."""
    return write_bytes_if_changed(path, text.encode())


def write_in_place_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` for files that may be bind mounts (``/etc/hosts`` in a container).

    A rename cannot replace a bind-mounted file (EBUSY or EXDEV), so this tries the atomic
    replace first and falls back to rewriting the file in place.
    """
    data = text.encode()
    if holds(path, data):
        return False
    try:
        atomic_write(path, data)
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM, errno.EACCES):
            raise
        with path.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    return True


def remove(path: Path) -> bool:
    """Delete ``path`` if it exists; True when something was removed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
