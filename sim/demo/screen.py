"""The demo's terminal: step headings, live lines stamped with the time since the story began,
and plain notes. Bold and dim only on a terminal, so captured output stays plain text."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from sim.demo.progress import stamp


class Screen:
    def __init__(self, out: TextIO = sys.stdout) -> None:
        self._out = out
        styled = out.isatty()
        self._bold, self._dim, self._reset = (
            ("\033[1m", "\033[2m", "\033[0m") if styled else ("", "", "")
        )
        self._started = time.monotonic()
        self._steps = 0

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def step(self, title: str) -> None:
        self._steps += 1
        self._write(f"\n{self._bold}{self._steps}. {title}{self._reset}")

    def heading(self, title: str) -> None:
        self._write(f"\n{self._bold}{title}{self._reset}")

    def live(self, text: str) -> None:
        self._write(f"  {self._dim}{stamp(self.elapsed()):>8}{self._reset}  {text}")

    def note(self, text: str = "") -> None:
        self._write(f"  {text}" if text else "")

    def _write(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()
