"""The daemon's own log, with the real daemon's levels and its in-memory verbose buffer.

LOG_LEVEL 0..4 selects what reaches the log (0 nothing, 1 critical ... 4 info). Records below
the level are not lost: like the real daemon, they are kept in a bounded in-memory buffer that
SIGHUP (and a clean shutdown) writes out. Each daemon owns its log object, so many daemons in
one process never share a handler or a level.
"""

from __future__ import annotations

import collections
import enum
import logging
import os
import sys
import time
from pathlib import Path
from typing import Literal, TextIO

from sim.imex.config import ImexConfig

__all__ = ["DaemonLog", "Level"]

_VERBOSE_BUFFER_RECORDS = 10_000


class Level(enum.IntEnum):
    CRITICAL = 1
    ERROR = 2
    WARNING = 3
    INFO = 4
    # Below anything LOG_LEVEL can select: only ever lands in the verbose buffer.
    DEBUG = 5


_PY_LEVEL = {
    Level.CRITICAL: logging.CRITICAL,
    Level.ERROR: logging.ERROR,
    Level.WARNING: logging.WARNING,
    Level.INFO: logging.INFO,
    Level.DEBUG: logging.DEBUG,
}


class DaemonLog:
    """Writes one daemon's records to its log file, a stream, or a ``logging`` logger."""

    def __init__(
        self,
        *,
        level: int,
        stream: TextIO | None = None,
        logger: logging.Logger | None = None,
        path: Path | None = None,
        max_bytes: int = 0,
        rotate_count: int = 0,
    ) -> None:
        self._level = level
        self._stream = stream
        self._logger = logger
        self._path = path
        self._max_bytes = max_bytes
        self._rotate_count = rotate_count
        self._stopped = False
        self._verbose: collections.deque[str] = collections.deque(maxlen=_VERBOSE_BUFFER_RECORDS)

    @classmethod
    def open(
        cls, config: ImexConfig, *, name: str, fallback: Literal["stderr", "logging"]
    ) -> DaemonLog:
        """The log ``config`` asks for; ``fallback`` is used when it names no usable file.

        As documented for the real daemon, a LOG_FILE_NAME that cannot be opened sends the log
        to the console instead of stopping the daemon.
        """
        problem = ""
        if config.log_use_syslog:
            problem = "LOG_USE_SYSLOG=1: the simulated daemon does not write to syslog"
        elif config.log_file_name:
            path = Path(config.log_file_name)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                stream = path.open(
                    "a" if config.log_append_to_log else "w", encoding="utf-8", buffering=1
                )
            except OSError as exc:
                problem = f"cannot open LOG_FILE_NAME {path}: {exc.strerror or exc}"
            else:
                return cls(
                    level=config.log_level,
                    stream=stream,
                    path=path,
                    max_bytes=config.log_file_max_size_mb * 1024 * 1024,
                    rotate_count=config.log_max_rotate_count,
                )
        if fallback == "stderr":
            log = cls(level=config.log_level, stream=sys.stderr)
        else:
            log = cls(level=config.log_level, logger=logging.getLogger(f"sim.imex.{name}"))
        if problem:
            log.warning(f"{problem}; logging to the console instead")
        return log

    @property
    def on_console(self) -> bool:
        """Whether records go to stderr (so a shell need not print them a second time)."""
        return self._stream is sys.stderr

    def critical(self, message: str) -> None:
        self._record(Level.CRITICAL, message)

    def error(self, message: str) -> None:
        self._record(Level.ERROR, message)

    def warning(self, message: str) -> None:
        self._record(Level.WARNING, message)

    def info(self, message: str) -> None:
        self._record(Level.INFO, message)

    def debug(self, message: str) -> None:
        self._record(Level.DEBUG, message)

    def dump_verbose(self) -> int:
        """Write out the buffered below-level records (what SIGHUP asks for); return how many."""
        records = list(self._verbose)
        self._verbose.clear()
        self._emit(Level.INFO, f"verbose buffer dump: {len(records)} records follow", force=True)
        for line in records:
            self._write_line(line)
        self._emit(Level.INFO, "verbose buffer dump: end", force=True)
        return len(records)

    def close(self) -> None:
        if self._path is not None and self._stream is not None:
            self._stream.close()
            self._stream = None

    def _record(self, level: Level, message: str) -> None:
        if level > self._level:
            self._verbose.append(self._format(level, message))
            return
        self._emit(level, message)

    def _emit(self, level: Level, message: str, *, force: bool = False) -> None:
        if self._logger is not None:
            self._logger.log(_PY_LEVEL[level], message)
            return
        if self._level == 0 and not force:
            return
        self._write_line(self._format(level, message))

    def _write_line(self, line: str) -> None:
        if self._logger is not None:
            self._logger.info(line)
            return
        if self._stream is None or self._stopped:
            return
        self._stream.write(line + "\n")
        self._stream.flush()
        self._rotate_if_full()

    @staticmethod
    def _format(level: Level, message: str) -> str:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        return f"[{stamp}.{int(now % 1 * 1000):03d}] [{level.name}] [pid {os.getpid()}] {message}"

    def _rotate_if_full(self) -> None:
        if self._path is None or self._stream is None or not self._max_bytes:
            return
        if self._stream.tell() < self._max_bytes:
            return
        if self._rotate_count == 0:
            # Documented behaviour: without rotation the log simply stops at its maximum size.
            self._stopped = True
            return
        self._stream.close()
        for index in range(self._rotate_count - 1, 0, -1):
            older = self._path.with_name(f"{self._path.name}.{index}")
            if older.exists():
                older.replace(self._path.with_name(f"{self._path.name}.{index + 1}"))
        self._path.replace(self._path.with_name(f"{self._path.name}.1"))
        self._stream = self._path.open("w", encoding="utf-8", buffering=1)
