"""Validation of names, label keys and label values, with the API server's messages."""

from __future__ import annotations

import re

from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.errors import FieldError

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = rf"({_QUALIFIED_NAME_FMT})?"

_DNS1123_LABEL = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _regex_msg(what: str, fmt: str, examples: tuple[str, ...]) -> str:
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{what} (e.g. {shown}, regex used for validation is '{fmt}')"


DNS1123_LABEL_MSG = _regex_msg(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
    _DNS1123_LABEL_FMT,
    ("my-name", "123-abc"),
)
DNS1123_SUBDOMAIN_MSG = _regex_msg(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    ("example.com",),
)
QUALIFIED_NAME_MSG = _regex_msg(
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character",
    _QUALIFIED_NAME_FMT,
    ("MyName", "my.name", "123-abc"),
)
LABEL_VALUE_MSG = _regex_msg(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    ("MyValue", "my_value", "12345"),
)
CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)


def dns1123_label(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_LABEL_MAX:
        problems.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not _DNS1123_LABEL.match(value):
        problems.append(DNS1123_LABEL_MSG)
    return problems


def dns1123_subdomain(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        problems.append(DNS1123_SUBDOMAIN_MSG)
    return problems


def path_segment_name(value: str) -> list[str]:
    """Names that only have to be usable as one URL path segment (custom resources)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    for bad in ("/", "%"):
        if bad in value:
            return [f"may not contain '{bad}'"]
    return []


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: ``[prefix/]name``."""
    problems: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems.extend(f"prefix part {p}" for p in dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + QUALIFIED_NAME_MSG.removeprefix("name part ")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        problems.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    if name and not _QUALIFIED_NAME.match(name):
        problems.append(QUALIFIED_NAME_MSG)
    return problems


def label_value(value: str) -> list[str]:
    problems = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.match(value):
        problems.append(LABEL_VALUE_MSG)
    return problems


def config_key(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _CONFIG_KEY.match(value):
        problems.append(CONFIG_KEY_MSG)
    return problems


def validate_labels(labels: object, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [errors.type_invalid(path, labels, "must be a map of strings")]
    out: list[FieldError] = []
    for key, value in labels.items():
        for problem in qualified_name(key):
            out.append(errors.invalid(path, key, problem))
        if not isinstance(value, str):
            out.append(errors.type_invalid(f"{path}[{key}]", value, "must be a string"))
            continue
        for problem in label_value(value):
            out.append(errors.invalid(f"{path}", value, problem))
    return out


def validate_annotations(annotations: object, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, dict):
        return [errors.type_invalid(path, annotations, "must be a map of strings")]
    out: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        for problem in qualified_name(key.lower()):
            out.append(errors.invalid(path, key, problem))
        if not isinstance(value, str):
            out.append(errors.type_invalid(f"{path}[{key}]", value, "must be a string"))
            continue
        total += len(key) + len(value)
    if total > 256 * 1024:
        out.append(errors.too_long(path, 256 * 1024))
    return out
