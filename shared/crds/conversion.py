"""ComputeDomain between ``v1beta1`` and ``v1beta2`` (the hub): what the conversion webhook does.

Pure; the clique allocator's webhook (services/clique_allocator/webhook/conversion.py) serves it.
The two versions differ in one field, as NVIDIA's converter has them (kubernetes-sigs/
dra-driver-nvidia-gpu, ``api/nvidia.com/resource/v1beta1/computedomain_conversion.go``):
``v1beta1``'s ``spec.numNodes`` is not in ``v1beta2`` and lives there in the annotation
``resource.nvidia.com/computedomain-num-nodes``. Everything else, status and cdo's own fields
(``spec.failover``, ``spec.gang``) included, has the same shape in both and is copied as it is.

- ``v1beta1`` to ``v1beta2``: ``spec.numNodes`` leaves the spec and its decimal text becomes the
  annotation (``0`` too, so that an explicit 0 comes back as 0); without ``numNodes`` the
  annotation is removed. The v1beta1 form decides: an annotation written beside it is replaced.
- ``v1beta2`` to ``v1beta1``: the annotation becomes ``spec.numNodes`` and leaves the metadata
  (NVIDIA hides it from v1beta1 too); without it there is no ``numNodes``. An annotation that is
  not a whole number from 0 to 100000 (what v1beta1's ``numNodes`` accepts) cannot become
  ``numNodes``: :class:`ConversionError`, naming the field.

So a round trip through either version gives back the object it started from.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from shared.crds.names import MAX_NUM_NODES, NUM_NODES_ANNOTATION, NVIDIA_GROUP

V1BETA1 = f"{NVIDIA_GROUP}/v1beta1"
V1BETA2 = f"{NVIDIA_GROUP}/v1beta2"
VERSIONS = (V1BETA1, V1BETA2)
NUM_NODES_FIELD = f"metadata.annotations[{NUM_NODES_ANNOTATION}]"
_WHOLE_NUMBER = re.compile(r"0|[1-9][0-9]*")

Obj = dict[str, Any]


class ConversionError(ValueError):
    """An object that cannot be given in the desired version; ``str()`` names the field as
    the API server's field errors do: ``<field>: Invalid value: "<value>": <why>``."""

    def __init__(self, field: str, value: str, why: str) -> None:
        super().__init__(f"{field}: Invalid value: {json.dumps(value)}: {why}")
        self.field = field
        self.value = value


def convert(obj: Obj, desired: str) -> Obj:
    """``obj`` (a ComputeDomain in either version) as ``desired``; a new object."""
    source = obj.get("apiVersion")
    for version in (source, desired):
        if version not in VERSIONS:
            raise ConversionError(
                "apiVersion", str(version or ""), f"must be one of {', '.join(VERSIONS)}"
            )
    out = copy.deepcopy(obj)
    out["apiVersion"] = desired
    if source == desired:
        return out
    metadata = out.setdefault("metadata", {})
    spec = out.setdefault("spec", {})
    annotations = dict(metadata.get("annotations") or {})
    if desired == V1BETA2:
        num_nodes = spec.pop("numNodes", None)
        annotations.pop(NUM_NODES_ANNOTATION, None)
        if num_nodes is not None:
            annotations[NUM_NODES_ANNOTATION] = str(num_nodes)
    else:
        text = annotations.pop(NUM_NODES_ANNOTATION, None)
        if text is not None:
            spec["numNodes"] = num_nodes_of(text)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return out


def num_nodes_of(text: str) -> int:
    """The ``numNodes`` an annotation value carries; ConversionError when it carries none."""
    if not _WHOLE_NUMBER.fullmatch(text) or int(text) > MAX_NUM_NODES:
        raise ConversionError(
            NUM_NODES_FIELD,
            text,
            f"must be a whole number from 0 to {MAX_NUM_NODES}: it is spec.numNodes of {V1BETA1}",
        )
    return int(text)
