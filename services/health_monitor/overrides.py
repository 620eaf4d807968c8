"""Operator overrides of the classification table, parsed from short text entries.

Grammar (entries are comma-separated in the environment; whitespace and case are ignored)::

    xid entry     XID=VALUE | FIRST-LAST=VALUE     e.g. 79=warning:reset_gpu, 144-150=warning
    signal entry  RULE=VALUE                       e.g. nvlink.down=fatal, gpu.lost=fatal:drain_node
    VALUE         ignore | SEVERITY | SEVERITY:ACTION
    SEVERITY      ok | warning | fatal
    ACTION        none | restart_app | reset_gpu | drain_node | recover_imex_domain

``ignore`` drops the signal (not classified, not counted). A SEVERITY without an ACTION keeps
the row's action. Entries apply in order, so ``144-150=warning,147=fatal`` leaves 147 fatal.
A bad entry raises ConfigError naming the variable, the entry and what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from services.health_monitor.rules import Action, Rule, Severity
from shared.errors import ConfigError

MAX_XID = 2**32 - 1
MAX_XID_RANGE = 1024  # a range is expanded into rows; keep that bounded

_VALUE_HELP = (
    "ignore, or SEVERITY[:ACTION] with SEVERITY one of "
    + ", ".join(severity.value for severity in Severity)
    + " and ACTION one of "
    + ", ".join(action.value for action in Action)
)


class Override(msgspec.Struct, frozen=True, kw_only=True):
    ignore: bool = False
    severity: Severity | None = None
    action: Action | None = None

    def apply(self, rule: Rule) -> Rule:
        if self.ignore:
            return msgspec.structs.replace(rule, ignored=True)
        return Rule(
            severity=self.severity or rule.severity,
            action=self.action or rule.action,
            summary=rule.summary,
        )


class _EntryError(ValueError):
    """What is wrong with one entry; the caller adds the variable and the entry."""


def parse_value(text: str) -> Override:
    """``ignore`` | ``SEVERITY`` | ``SEVERITY:ACTION``."""
    value = text.strip().lower()
    if value == "ignore":
        return Override(ignore=True)
    severity_text, _, action_text = value.partition(":")
    try:
        severity = Severity(severity_text.strip())
    except ValueError:
        raise _EntryError(f"unknown severity {severity_text.strip()!r}") from None
    if not action_text.strip():
        if ":" in value:
            raise _EntryError("empty action after ':'")
        return Override(severity=severity)
    try:
        action = Action(action_text.strip())
    except ValueError:
        raise _EntryError(f"unknown action {action_text.strip()!r}") from None
    return Override(severity=severity, action=action)


def _split(entry: str) -> tuple[str, str]:
    key, separator, value = entry.partition("=")
    if not separator:
        raise _EntryError("missing '='")
    if not key.strip():
        raise _EntryError("missing key before '='")
    return key.strip().lower(), value


def _xid(text: str) -> int:
    if not text.isdecimal():
        raise _EntryError(f"{text!r} is not an XID number")
    xid = int(text)
    if not 1 <= xid <= MAX_XID:
        raise _EntryError(f"XID {xid} is outside 1..{MAX_XID}")
    return xid


def _xids(key: str) -> range:
    first_text, dash, last_text = key.partition("-")
    first = _xid(first_text.strip())
    last = _xid(last_text.strip()) if dash else first
    if last < first:
        raise _EntryError(f"range {first}-{last} is empty")
    if last - first + 1 > MAX_XID_RANGE:
        raise _EntryError(f"range {first}-{last} spans more than {MAX_XID_RANGE} XIDs")
    return range(first, last + 1)


def _failure(variable: str, entry: str, problem: _EntryError, expected: str) -> ConfigError:
    return ConfigError(f"{variable}: entry {entry.strip()!r}: {problem}; expected {expected}")


def parse_xid_overrides(entries: Sequence[str], *, variable: str) -> dict[str, Override]:
    """XID entries -> overrides keyed by rule (``xid.<n>``), later entries winning."""
    overrides: dict[str, Override] = {}
    for entry in entries:
        if not entry.strip():
            continue
        try:
            key, value = _split(entry)
            xids, override = _xids(key), parse_value(value)
        except _EntryError as problem:
            expected = f"XID=VALUE or FIRST-LAST=VALUE with VALUE {_VALUE_HELP}"
            raise _failure(variable, entry, problem, expected) from None
        for xid in xids:
            overrides[f"xid.{xid}"] = override
    return overrides


def parse_signal_overrides(
    entries: Sequence[str], *, variable: str, known: Mapping[str, Rule]
) -> dict[str, Override]:
    """RULE entries (a key of ``known``) -> overrides keyed by rule, later entries winning."""
    overrides: dict[str, Override] = {}
    for entry in entries:
        if not entry.strip():
            continue
        try:
            key, value = _split(entry)
            if key not in known:
                raise _EntryError(f"unknown rule {key!r} (see docs/health-classification.md)")
            overrides[key] = parse_value(value)
        except _EntryError as problem:
            expected = f"RULE=VALUE with VALUE {_VALUE_HELP}"
            raise _failure(variable, entry, problem, expected) from None
    return overrides


def apply_overrides(
    rules: Mapping[str, Rule], overrides: Mapping[str, Override]
) -> dict[str, Rule]:
    """The table with each override applied to its row, in order.

    An XID the catalog does not list has no row yet; its override starts from ``xid.default``.
    """
    result = dict(rules)
    for key, override in overrides.items():
        base = result.get(key)
        if base is None:
            base = _uncatalogued(result["xid.default"], key)
        result[key] = override.apply(base)
    return result


def _uncatalogued(default: Rule, key: str) -> Rule:
    xid = key.removeprefix("xid.")
    return msgspec.structs.replace(default, summary=f"XID {xid}: set by operator override")
