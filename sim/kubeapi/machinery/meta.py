"""ObjectMeta rules shared by every kind: system fields, generated names, validation."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

from sim.kubeapi.machinery import codec, errors, names
from sim.kubeapi.machinery.errors import FieldError

Obj = dict[str, Any]

STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"

# System fields a client cannot change through an update; the server keeps the old values.
_KEPT_ON_UPDATE = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_random = random.Random()


def meta(obj: Obj) -> dict[str, Any]:
    found = obj.get("metadata")
    if not isinstance(found, dict):
        found = obj["metadata"] = {}
    return found


def generate_name(prefix: str) -> str:
    """``generateName`` plus five random characters (the real server's alphabet)."""
    if len(prefix) > 58:
        prefix = prefix[:58]
    return prefix + "".join(_random.choice(_GENERATE_ALPHABET) for _ in range(5))


def fill_system_fields(obj: Obj, *, has_generation: bool) -> None:
    """Server-set metadata of a new object."""
    m = meta(obj)
    m["uid"] = str(uuid.uuid4())
    m["creationTimestamp"] = codec.format_time(codec.now())
    for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        m.pop(key, None)
    if has_generation:
        m["generation"] = 1
    else:
        m.pop("generation", None)


def keep_system_fields(new: Obj, old: Obj) -> None:
    """Updates may not touch uid, creation or deletion timestamps, or generation."""
    new_meta, old_meta = meta(new), meta(old)
    for key in _KEPT_ON_UPDATE:
        if key in old_meta:
            new_meta[key] = old_meta[key]
        else:
            new_meta.pop(key, None)
    if "generation" in old_meta:
        new_meta["generation"] = old_meta["generation"]
    else:
        new_meta.pop("generation", None)
    new_meta.pop("selfLink", None)


def same_metadata(new: Obj, old: Obj) -> bool:
    """Whether the validated parts of metadata are unchanged."""
    new_meta, old_meta = meta(new), meta(old)
    return all(
        new_meta.get(k) == old_meta.get(k)
        for k in ("name", "namespace", "labels", "annotations", "ownerReferences", "finalizers")
    )


def spec_equal(new: Obj, old: Obj) -> bool:
    """True when nothing outside metadata and status changed (generation stays)."""
    keys = (set(new) | set(old)) - {"metadata", "status", "apiVersion", "kind"}
    return all(new.get(k) == old.get(k) for k in keys)


def validate_object_meta(
    obj: Obj,
    *,
    namespaced: bool,
    name_rule: Callable[[str], list[str]],
    creating: bool,
) -> list[FieldError]:
    m = meta(obj)
    out: list[FieldError] = []
    name = m.get("name")
    if not name:
        if (creating and not m.get("generateName")) or not creating:
            out.append(errors.required("metadata.name", "name or generateName is required"))
    elif not isinstance(name, str):
        out.append(errors.type_invalid("metadata.name", name, "must be a string"))
    else:
        for problem in name_rule(name):
            out.append(errors.invalid("metadata.name", name, problem))
    generate = m.get("generateName")
    if generate and not name:
        for problem in name_rule(generate_name(generate)):
            out.append(errors.invalid("metadata.generateName", generate, problem))
    if namespaced:
        ns = m.get("namespace")
        if not ns:
            out.append(errors.required("metadata.namespace"))
        else:
            for problem in names.dns1123_label(ns):
                out.append(errors.invalid("metadata.namespace", ns, problem))
    elif m.get("namespace"):
        out.append(errors.forbidden("metadata.namespace", "not allowed on this type"))
    out.extend(names.validate_labels(m.get("labels"), "metadata.labels"))
    out.extend(names.validate_annotations(m.get("annotations"), "metadata.annotations"))
    out.extend(_validate_owner_references(m.get("ownerReferences")))
    out.extend(_validate_finalizers(m.get("finalizers")))
    return out


def _validate_owner_references(refs: Any) -> list[FieldError]:
    if refs is None:
        return []
    out: list[FieldError] = []
    controllers = 0
    for i, ref in enumerate(refs):
        path = f"metadata.ownerReferences[{i}]"
        if not isinstance(ref, dict):
            out.append(errors.type_invalid(path, ref, "must be an object"))
            continue
        if not ref.get("apiVersion"):
            out.append(
                errors.invalid(
                    f"{path}.apiVersion", ref.get("apiVersion", ""), "version must not be empty"
                )
            )
        if not ref.get("kind"):
            out.append(
                errors.invalid(f"{path}.kind", ref.get("kind", ""), "kind must not be empty")
            )
        if not ref.get("name"):
            out.append(
                errors.invalid(f"{path}.name", ref.get("name", ""), "name must not be empty")
            )
        if not ref.get("uid"):
            out.append(errors.invalid(f"{path}.uid", ref.get("uid", ""), "uid must not be empty"))
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        out.append(
            errors.invalid(
                "metadata.ownerReferences",
                refs,
                "Only one reference can have Controller set to true",
            )
        )
    return out


def _validate_finalizers(finalizers: Any) -> list[FieldError]:
    if finalizers is None:
        return []
    out: list[FieldError] = []
    for i, name in enumerate(finalizers):
        path = f"metadata.finalizers[{i}]"
        if not isinstance(name, str):
            out.append(errors.type_invalid(path, name, "must be a string"))
            continue
        for problem in names.qualified_name(name):
            out.append(errors.invalid(path, name, problem))
    if finalizers and ORPHAN_FINALIZER in finalizers and FOREGROUND_FINALIZER in finalizers:
        out.append(
            errors.invalid(
                "metadata.finalizers",
                finalizers,
                "finalizer orphan and foregroundDeletion cannot be both set",
            )
        )
    return out


def validate_finalizer_update(new: Obj, old: Obj) -> list[FieldError]:
    """Once an object is being deleted, finalizers may only be removed."""
    old_meta = meta(old)
    if not old_meta.get("deletionTimestamp"):
        return []
    before = set(old_meta.get("finalizers") or ())
    added = [f for f in meta(new).get("finalizers") or () if f not in before]
    if not added:
        return []
    shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
    return [
        errors.forbidden(
            "metadata.finalizers",
            "no new finalizers can be added if the object is being deleted, found new "
            f"finalizers {shown}",
        )
    ]
