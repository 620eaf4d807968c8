"""How a bench reports its figures: the ``RESULT`` line, the measure/value table, quantiles and
runs that timed out. One place for the rules every bench keeps:

- A figure that was not measured has no key. A scenario that did not run, or a quantile of no
  samples, leaves its key out of the RESULT line: never a 0 or a ``nan`` standing for "missing".
  :func:`result_line` leaves out every figure whose value is None; :func:`fixed` and
  :func:`percentile` give None and NaN for what is missing, so a bench cannot format it by accident.
- A run that timed out is not a sample. :class:`Runs` keeps the seconds of the runs that finished
  and counts the others apart; its figures are over the finished runs, its table cell says how
  many timed out, and a target is met only when the runs that timed out could not change that
  (:meth:`Runs.p50_at_least`).
- A figure this machine did not measure (a published anchor) is no RESULT key: the table shows it
  with its source.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


def fixed(value: float | None, digits: int) -> str | None:
    """``value`` with ``digits`` decimals; None when there is no figure (None or NaN)."""
    if value is None or math.isnan(value):
        return None
    return f"{value:.{digits}f}"


def result_line(figures: Iterable[tuple[str, str | int | None]]) -> str:
    """``RESULT key=value ...`` in the order given, leaving out every figure that is None."""
    return "RESULT " + " ".join(f"{key}={value}" for key, value in figures if value is not None)


def measure_table(rows: Sequence[tuple[str, str]], *, rule: int = 40) -> list[str]:
    """The two-column table of the benches that report one value per measure."""
    width = max((len(name) for name, _ in rows), default=len("measure"))
    lines = [f"{'measure'.ljust(width)}  value", f"{'-' * width}  {'-' * rule}"]
    lines += [f"{name.ljust(width)}  {value}" for name, value in rows]
    return lines


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile by nearest rank (the sample at index ``int(q * n)``); NaN when there
    are no samples, which :func:`fixed` turns into no figure."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Runs:
    """The timed runs of one measure: the seconds of those that finished, and how many did not
    finish before the bench's timeout (they have no time; they are not counted as the timeout)."""

    seconds: list[float] = field(default_factory=list)
    timeouts: int = 0

    @property
    def count(self) -> int:
        return len(self.seconds) + self.timeouts

    @property
    def p50(self) -> float | None:
        """Median over the finished runs; None when none finished."""
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def low(self) -> float | None:
        return min(self.seconds) if self.seconds else None

    @property
    def high(self) -> float | None:
        return max(self.seconds) if self.seconds else None

    def p50_at_least(self) -> float:
        """The median of every run, a run that timed out taken as longer than any: a lower bound
        of the true median (infinite when half the runs or more timed out), for target verdicts."""
        return statistics.median([*self.seconds, *(math.inf,) * self.timeouts])

    def verdict(self, target: float) -> str:
        """``met`` when even the lower bound of the median is under ``target``."""
        return "met" if self.p50_at_least() < target else "MISSED"

    def cells(self) -> tuple[str, str, str]:
        """p50, min and max for a table, over the finished runs; "-" where none finished; the
        p50 cell carries a ``*`` when runs timed out (they are not in it)."""
        mark = "*" if self.timeouts else ""
        return (
            f"{_cell(self.p50)}{mark}",
            _cell(self.low),
            _cell(self.high),
        )


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
