"""Settings from environment variables, declared as small msgspec Structs.

A settings Struct documents each field with ``Annotated[T, Meta(description=...)]``. The variable
for a field is the prefix plus the field name in upper case; a nested Struct adds its field name
as another prefix segment::

    class NatsSettings(Settings):
        url: Annotated[str, Meta(description="NATS server URL")] = "nats://127.0.0.1:4222"

    class RuntimeSettings(Settings):
        nats: NatsSettings = NatsSettings()

    load_settings(RuntimeSettings, prefix="CDO_")   # reads CDO_NATS_URL

A nested Struct marked ``INLINE`` is a group in code only: its fields read variables without its
field name (``api: Annotated[ApiSettings, INLINE]`` reads ``CDO_KUBECONFIG`` for
``api.kubeconfig``), so settings can be grouped without renaming the variables a deployment sets.

Sequences are written comma-separated. Values are converted leniently from text (``"5"`` is an
int, ``"true"``/``"1"`` a bool); a value that does not convert raises ConfigError naming the
variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from msgspec import Meta
from msgspec import inspect as mi

from shared.errors import ConfigError


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every settings Struct."""


INLINE = Meta(extra={"inline": True})
"""Annotates a nested settings field whose variables leave out the field's own name."""


S = TypeVar("S", bound=Settings)

_SEQUENCE_TYPES = (mi.ListType, mi.TupleType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)
_PATH_SEGMENT = re.compile(r"\.([A-Za-z0-9_]+)")
_MISSING_FIELD = re.compile(r"Object missing required field `([A-Za-z0-9_]+)`")


def env_name(prefix: str, path: tuple[str, ...]) -> str:
    """The environment variable that holds the field at ``path`` below ``prefix``."""
    return prefix + "_".join(segment.upper() for segment in path)


def _struct_info(cls: type[Any]) -> mi.StructType:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType), f"{cls!r} is not a msgspec Struct"
    return info


def _inline(t: mi.Type) -> bool:
    return isinstance(t, mi.Metadata) and bool((t.extra or {}).get("inline"))


def _env_path(field: mi.Field, path: tuple[str, ...]) -> tuple[str, ...]:
    """The variable name segments of ``field`` below ``path``: an inline group adds none."""
    return path if _inline(field.type) else (*path, field.name)


def _unwrap(t: mi.Type) -> mi.Type:
    if isinstance(t, mi.Metadata):
        return _unwrap(t.type)
    if isinstance(t, mi.UnionType):
        concrete = [_unwrap(member) for member in t.types if not isinstance(member, mi.NoneType)]
        if len(concrete) == 1:
            return concrete[0]
    return t


def _collect(
    info: mi.StructType, *, prefix: str, path: tuple[str, ...], environ: Mapping[str, str]
) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for field in info.fields:
        field_path = _env_path(field, path)
        field_type = _unwrap(field.type)
        if isinstance(field_type, mi.StructType):
            nested = _collect(field_type, prefix=prefix, path=field_path, environ=environ)
            if nested:
                # Variables override single fields of the nested default, which may itself
                # differ from its class's defaults (e.g. ``inner: Inner = Inner(workers=8)``).
                default = field.default if isinstance(field.default, msgspec.Struct) else None
                base = msgspec.to_builtins(default) if default is not None else {}
                raw[field.name] = {**base, **nested}
            continue
        value = environ.get(env_name(prefix, field_path))
        if value is None:
            continue
        if isinstance(field_type, _SEQUENCE_TYPES):
            raw[field.name] = [item.strip() for item in value.split(",") if item.strip()]
        else:
            raw[field.name] = value
    return raw


def load_settings(cls: type[S], *, prefix: str, environ: Mapping[str, str] | None = None) -> S:
    """Build ``cls`` from environment variables named ``prefix`` + field path."""
    environ = os.environ if environ is None else environ
    raw = _collect(_struct_info(cls), prefix=prefix, path=(), environ=environ)
    try:
        return msgspec.convert(raw, cls, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        path = tuple(_PATH_SEGMENT.findall(message.rpartition("at `$")[2]))
        if (missing := _MISSING_FIELD.match(message)) is not None:
            path = (*path, missing.group(1))
            message = "required, not set"
        where = env_name(prefix, _variable_path(cls, path)) if path else prefix + "*"
        shown = f"={environ[where]!r}" if where in environ else ""
        raise ConfigError(f"{where}{shown}: {message.split(' - at ')[0]}") from exc


def settings_environ(value: Settings, *, prefix: str) -> dict[str, str]:
    """The variables that make :func:`load_settings` read ``value`` back (every field, so a
    child process started with them sees exactly these settings)."""
    environ: dict[str, str] = {}

    def walk(info: mi.StructType, struct: Any, path: tuple[str, ...]) -> None:
        for field in info.fields:
            field_path = _env_path(field, path)
            field_type = _unwrap(field.type)
            item = getattr(struct, field.name)
            if isinstance(field_type, mi.StructType) and isinstance(item, msgspec.Struct):
                walk(field_type, item, field_path)
            elif isinstance(item, bool):
                environ[env_name(prefix, field_path)] = str(item).lower()
            elif isinstance(item, list | tuple):
                environ[env_name(prefix, field_path)] = ",".join(str(x) for x in item)
            elif item is not None:
                environ[env_name(prefix, field_path)] = str(item)

    walk(_struct_info(type(value)), value, ())
    return environ


def _variable_path(cls: type[Any], fields: tuple[str, ...]) -> tuple[str, ...]:
    """The variable name segments of the field at ``fields`` (attribute names from the root)."""
    info: mi.Type = _struct_info(cls)
    path: tuple[str, ...] = ()
    for name in fields:
        if not isinstance(info, mi.StructType):
            return (*path, name)
        field = next((f for f in info.fields if f.name == name), None)
        if field is None:
            return (*path, name)
        path = _env_path(field, path)
        info = _unwrap(field.type)
    return path


def describe_settings(cls: type[Settings], *, prefix: str) -> list[tuple[str, str, str]]:
    """(variable, default, description) for every field, nested ones included, for docs."""
    rows: list[tuple[str, str, str]] = []

    def walk(info: mi.StructType, path: tuple[str, ...], defaults: Any) -> None:
        # ``defaults`` is the Struct this level's values default to: a nested field's own
        # default may differ from its class's (``lease: Lease = Lease(name="mine")``).
        for field in info.fields:
            field_path = _env_path(field, path)
            field_type = _unwrap(field.type)
            default = field.default if defaults is None else getattr(defaults, field.name)
            if isinstance(field_type, mi.StructType):
                nested = default if isinstance(default, msgspec.Struct) else None
                walk(field_type, field_path, nested)
                continue
            description = ""
            if isinstance(field.type, mi.Metadata):
                description = str((field.type.extra_json_schema or {}).get("description", ""))
            shown = "" if field.required and defaults is None else repr(default)
            rows.append((env_name(prefix, field_path), shown, description))

    walk(_struct_info(cls), (), None)
    return rows


def describe_table(
    cls: type[Settings], *, prefix: str, default_width: int = 10, empty: str = "(empty)"
) -> str:
    """Every variable of ``cls`` with its default (``empty`` for an empty one) and meaning, one
    per line in aligned columns: what a service's ``--settings`` prints."""
    rows = describe_settings(cls, prefix=prefix)
    width = max(len(name) for name, _default, _doc in rows)
    return "\n".join(
        f"{name:<{width}}  {default or empty:<{default_width}}  {doc}"
        for name, default, doc in rows
    )
