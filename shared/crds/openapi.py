"""An OpenAPI v3 structural schema, as a CRD wants it, derived from msgspec Structs.

The Structs in this package are the single source of a custom resource's shape: services
decode API objects into them, and the CRD's ``openAPIV3Schema`` is generated from them here.
What a Struct says turns into schema like this:

- a field's wire name (``rename="camel"`` or ``msgspec.field(name=...)``): the property name;
- a field without a default: listed in ``required``;
- ``X | None = None``: a property of type X, optional (never ``nullable``);
- ``Literal["a", "b"]``: ``type: string`` with ``enum``;
- ``Meta(ge=, le=, min_length=, max_length=, pattern=)``: ``minimum``, ``maximum``,
  ``minLength``/``minItems`` ...;
- ``Meta(description=...)``, else the Struct's docstring: ``description``;
- ``Meta(extra_json_schema={...})``: merged as is (``x-kubernetes-validations``, list types);
- ``Meta(extra={"crd_default": True})``: the field's Python default becomes the ``default``.

Only that last marker produces a ``default``: the API server applies schema defaults to every
object it stores, so a default is a decision, not a side effect of a Python default.
"""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
from msgspec import inspect as mi

Schema = dict[str, Any]

CRD_DEFAULT = "crd_default"
"""Key of ``Meta(extra={...})`` that asks for the field's default to be the schema default."""


def struct_schema(cls: type[msgspec.Struct]) -> Schema:
    """The structural schema of ``cls`` (an object with its fields as properties)."""
    info = mi.type_info(cls)
    if not isinstance(info, mi.StructType):
        raise TypeError(f"{cls!r} is not a msgspec Struct")
    return _struct(info)


def _docstring(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _struct(info: mi.StructType) -> Schema:
    schema: Schema = {"type": "object"}
    description = _docstring(info.cls)
    if description:
        schema["description"] = description
    properties: dict[str, Schema] = {}
    required: list[str] = []
    for field in info.fields:
        prop = _type(field.type)
        if _wants_default(field.type):
            if field.default is msgspec.NODEFAULT:
                raise ValueError(f"{info.cls.__name__}.{field.name}: crd_default needs a default")
            prop["default"] = msgspec.to_builtins(field.default)
        properties[field.encode_name] = prop
        if field.required:
            required.append(field.encode_name)
    schema["properties"] = properties
    if required:
        schema["required"] = required
    return schema


def _wants_default(t: mi.Type) -> bool:
    if isinstance(t, mi.Metadata):
        return bool((t.extra or {}).get(CRD_DEFAULT)) or _wants_default(t.type)
    if isinstance(t, mi.UnionType):
        return any(_wants_default(member) for member in t.types)
    return False


def _type(t: mi.Type) -> Schema:
    if isinstance(t, mi.Metadata):
        schema = _type(t.type)
        extra = dict(t.extra_json_schema or {})
        # A field's own description wins over the docstring of the Struct it holds.
        schema.update(extra)
        return _ordered(schema)
    if isinstance(t, mi.UnionType):
        members = [member for member in t.types if not isinstance(member, mi.NoneType)]
        if len(members) != 1:
            raise TypeError(f"only Optional unions map to a structural schema, not {t!r}")
        return _type(members[0])
    if isinstance(t, mi.StructType):
        return _struct(t)
    if isinstance(t, mi.BoolType):
        return {"type": "boolean"}
    if isinstance(t, mi.IntType):
        return _bounded({"type": "integer"}, t)
    if isinstance(t, mi.FloatType):
        return _bounded({"type": "number"}, t)
    if isinstance(t, mi.StrType):
        schema = {"type": "string"}
        _put(schema, "minLength", t.min_length)
        _put(schema, "maxLength", t.max_length)
        _put(schema, "pattern", t.pattern)
        return schema
    if isinstance(t, mi.DateTimeType):
        return {"type": "string", "format": "date-time"}
    if isinstance(t, mi.LiteralType):
        values = list(t.values)
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"only string literals map to an enum, not {values!r}")
        return {"type": "string", "enum": values}
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        schema = {"type": "array", "items": _type(t.item_type)}
        _put(schema, "minItems", t.min_length)
        _put(schema, "maxItems", t.max_length)
        return schema
    if isinstance(t, mi.DictType):
        if not isinstance(t.key_type, mi.StrType):
            raise TypeError("only string-keyed dicts map to a structural schema")
        schema = {"type": "object", "additionalProperties": _type(t.value_type)}
        _put(schema, "minProperties", t.min_length)
        _put(schema, "maxProperties", t.max_length)
        return schema
    raise TypeError(f"no structural schema for {t!r}")


def _bounded(schema: Schema, t: mi.IntType | mi.FloatType) -> Schema:
    if t.gt is not None or t.lt is not None:
        raise TypeError("use ge/le for CRD bounds (structural schemas have no exclusive bounds)")
    _put(schema, "minimum", t.ge)
    _put(schema, "maximum", t.le)
    _put(schema, "multipleOf", t.multiple_of)
    return schema


_FIRST = ("type", "description")


def _ordered(schema: Schema) -> Schema:
    """``type`` and ``description`` first, so the YAML reads like a hand-written CRD."""
    return {
        **{key: schema[key] for key in _FIRST if key in schema},
        **{key: value for key, value in schema.items() if key not in _FIRST},
    }


def _put(schema: Schema, key: str, value: object) -> None:
    if value is not None:
        schema[key] = value
