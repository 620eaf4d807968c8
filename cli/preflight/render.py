"""``cdo preflight``'s report as text: one line per check under its section, what to do below a
check that is not ok, and a last line that counts them."""

from __future__ import annotations

from collections.abc import Sequence

from cli.preflight.checks import Check

SECTIONS = {
    "cluster": "Kubernetes",
    "nodes": "GPU nodes",
    "cdo": "cdo",
}
MARKS = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}


def render(checks: Sequence[Check]) -> str:
    lines: list[str] = []
    section = ""
    for check in checks:
        if check.section != section:
            section = check.section
            lines += [""] if lines else []
            lines.append(SECTIONS[section])
        lines.append(f"  {MARKS[check.status]:<5} {check.name}: {check.message}")
        if check.hint and check.status in ("warn", "fail"):
            lines.append(f"        -> {check.hint}")
    lines += ["", summary(checks)]
    return "\n".join(lines)


def summary(checks: Sequence[Check]) -> str:
    counts = {status: sum(1 for c in checks if c.status == status) for status in MARKS}
    if counts["fail"]:
        verdict = "not ready for cdo"
    elif counts["warn"]:
        verdict = "ready for cdo, with warnings"
    else:
        verdict = "ready for cdo"
    parts = [
        f"{counts['ok']} ok",
        _count(counts["warn"], "warning"),
        _count(counts["fail"], "failure"),
    ]
    if counts["skip"]:
        parts.append(f"{counts['skip']} skipped")
    return f"{verdict}: {', '.join(parts)}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
