"""Query options of list, watch and write requests, validated as the real server does."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sim.kubeapi.machinery import errors, selectors
from sim.kubeapi.machinery.errors import FieldError

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
RV_MATCHES = ("Exact", "NotOlderThan", "")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_bool(query: Mapping[str, str], name: str, *, default: bool = False) -> bool:
    """Go's strconv.ParseBool, which is why both ``watch=true`` and ``watch=True`` work."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{raw}": invalid syntax')


def parse_int(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def parse_rv(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {text!r}") from None
    if value < 0:
        raise errors.bad_request(f"invalid resource version: {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class ListOptions:
    labels: selectors.LabelSelector
    fields: selectors.FieldSelector
    limit: int
    continue_token: str
    resource_version: str
    resource_version_match: str
    watch: bool
    allow_bookmarks: bool
    timeout_seconds: int | None
    send_initial_events: bool | None


def list_options(
    query: Mapping[str, str], *, supported_fields: set[str], watch: bool
) -> ListOptions:
    watch = watch or parse_bool(query, "watch")
    send_initial: bool | None = None
    if query.get("sendInitialEvents", "") != "":
        send_initial = parse_bool(query, "sendInitialEvents")
    opts = ListOptions(
        labels=selectors.parse_label_selector(query.get("labelSelector")),
        fields=selectors.parse_field_selector(query.get("fieldSelector"), supported_fields),
        limit=max(0, parse_int(query, "limit") or 0),
        continue_token=query.get("continue", ""),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
        watch=watch,
        allow_bookmarks=parse_bool(query, "allowWatchBookmarks"),
        timeout_seconds=parse_int(query, "timeoutSeconds"),
        send_initial_events=send_initial,
    )
    problems = _validate(opts)
    if problems:
        raise errors.invalid_options("ListOptions", problems)
    if opts.resource_version and opts.resource_version != "0" and opts.continue_token:
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    if opts.resource_version:
        parse_rv(opts.resource_version)
    return opts


def _validate(opts: ListOptions) -> list[FieldError]:
    out: list[FieldError] = []
    match = opts.resource_version_match
    if match not in RV_MATCHES:
        out.append(errors.not_supported("resourceVersionMatch", match, RV_MATCHES))
        return out
    if opts.send_initial_events is not None:
        if not opts.watch:
            out.append(
                errors.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
            )
        else:
            if match != "NotOlderThan":
                out.append(
                    errors.forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )
                )
            if opts.send_initial_events and not opts.allow_bookmarks:
                out.append(
                    errors.forbidden(
                        "allowWatchBookmarks",
                        "sendInitialEvents requires setting allowWatchBookmarks to true",
                    )
                )
        return out
    if match:
        if opts.watch:
            out.append(
                errors.forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden for watch"
                )
            )
        elif not opts.resource_version:
            out.append(
                errors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        elif opts.continue_token:
            out.append(
                errors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        elif match == "Exact" and opts.resource_version == "0":
            out.append(
                errors.forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    return out


def field_validation(query: Mapping[str, str]) -> str:
    value = query.get("fieldValidation", "") or "Warn"
    if value not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(
            f"fieldValidation: Unsupported value: {value!r}: supported values: Ignore, Strict, Warn"
        )
    return value


def dry_run(values: list[str]) -> bool:
    """``dryRun`` may only be ``All``."""
    for value in values:
        if value != "All":
            raise errors.invalid_options(
                "CreateOptions", [errors.not_supported("dryRun", value, ("All",))]
            )
    return bool(values)


def parse_duration(query: Mapping[str, str], name: str) -> float | None:
    """A Go duration (``1.5s``, ``500ms``, ``1m30s``) in seconds, as the ``timeout`` option of
    a request is written; None when absent."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    parts = _DURATION_PART.findall(raw)
    if not parts or "".join(number + unit for number, unit in parts) != raw:
        raise errors.bad_request(f'time: invalid duration "{raw}"')
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
