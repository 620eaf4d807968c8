"""JSON patch (RFC 6902), applied with the ``jsonpatch`` library and failing as the API
server fails.

The library does the pointer walking and the six operations. This wrapper keeps the server's
contract around it: a document that is not a list of operation objects, or an operation the
RFC does not define, is malformed (400); an operation that does not apply to the document, a
missing ``path``/``value``/``from`` member, or a failed ``test`` is a 422, with the messages of
kube-apiserver's json-patch library.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer

from sim.kubeapi.machinery import codec
from sim.kubeapi.patches.failures import PatchError, PatchFormatError

OPERATIONS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_NEEDS_VALUE = frozenset({"add", "replace"})
_NEEDS_FROM = frozenset({"move", "copy"})


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 patch, returning the new document (the inputs are not modified)."""
    if not isinstance(operations, list):
        raise PatchFormatError(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    for operation in operations:
        _check_shape(operation)
    # One copy up front, then each operation in place: the library would copy per operation.
    doc = codec.copy(target)
    for operation in codec.copy(operations):
        doc = _apply_one(doc, operation)
    return doc


def _check_shape(operation: Any) -> None:
    """Reject what the library would reject with its own words, in the server's words."""
    if not isinstance(operation, dict):
        raise PatchFormatError("json: cannot unmarshal into Go value of type jsonpatch.Operation")
    op = operation.get("op")
    if op not in OPERATIONS:
        raise PatchFormatError(f"Unexpected kind: {op}")
    if not isinstance(operation.get("path"), str):
        raise PatchError(f"{op} operation does not apply: missing path")
    if op in _NEEDS_VALUE and "value" not in operation:
        raise PatchError(f"{op} operation does not apply: missing value")
    if op in _NEEDS_FROM and not isinstance(operation.get("from"), str):
        raise PatchError(f"{op} operation does not apply: missing from path")


def _apply_one(doc: Any, operation: dict[str, Any]) -> Any:
    op, path = operation["op"], operation["path"]
    try:
        return jsonpatch.JsonPatch([operation]).apply(doc, in_place=True)
    except jsonpatch.JsonPatchTestFailed:
        raise PatchError(f"testing value {path} failed: test failed") from None
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ):
        # A missing key or index, an index out of bounds, or a step into a scalar.
        raise PatchError(
            f'{op} operation does not apply: doc is missing path: "{path}": missing value'
        ) from None
