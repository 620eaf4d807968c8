"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on JSON trees."""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import codec


class PatchError(ValueError):
    """A patch that does not apply; the server answers 422 with this message."""


class PatchFormatError(ValueError):
    """A patch document that is malformed; the server answers 400 with this message."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch, returning the new value (inputs are not modified)."""
    if not isinstance(patch, dict):
        return codec.copy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'JSON pointer must be empty or start with a "/": {path!r}')
    return [_unescape(t) for t in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return size
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise PatchError(f"invalid array index: {token!r}")
    index = int(token)
    if index > size or (index == size and not allow_end):
        raise PatchError(f"array index out of bounds: {index}")
    return index


def _parent(doc: Any, tokens: list[str], op: str, path: str) -> tuple[Any, str]:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(
                    f'{op} operation does not apply: doc is missing path: "{path}": missing value'
                )
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), allow_end=False)]
        else:
            raise PatchError(
                f'{op} operation does not apply: doc is missing path: "{path}": missing value'
            )
    return node, tokens[-1]


def _get(doc: Any, path: str, op: str) -> Any:
    node = doc
    for token in _pointer(path):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), allow_end=False)]
        else:
            raise PatchError(
                f'{op} operation does not apply: doc is missing path: "{path}": missing value'
            )
    return node


def _add(doc: Any, path: str, value: Any, op: str = "add") -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, op, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise PatchError(
            f'{op} operation does not apply: doc is missing path: "{path}": missing value'
        )
    return doc


def _remove(doc: Any, path: str, op: str = "remove") -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError(f"{op} operation does not apply: cannot remove the whole document")
    parent, last = _parent(doc, tokens, op, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(
                f"{op} operation does not apply: doc is missing key: {path}: missing value"
            )
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent), allow_end=False))
    raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 patch, returning the new document (the input is not modified)."""
    if not isinstance(operations, list):
        raise PatchFormatError(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = codec.copy(target)
    for operation in operations:
        if not isinstance(operation, dict):
            raise PatchFormatError(
                "json: cannot unmarshal into Go value of type jsonpatch.Operation"
            )
        op = operation.get("op")
        path = operation.get("path")
        if not isinstance(path, str):
            raise PatchError(f"{op} operation does not apply: missing path")
        if op == "add":
            if "value" not in operation:
                raise PatchError("add operation does not apply: missing value")
            doc = _add(doc, path, codec.copy(operation["value"]))
        elif op == "remove":
            doc, _ = _remove(doc, path)
        elif op == "replace":
            if "value" not in operation:
                raise PatchError("replace operation does not apply: missing value")
            tokens = _pointer(path)
            if not tokens:
                doc = codec.copy(operation["value"])
                continue
            parent, last = _parent(doc, tokens, op, path)
            if isinstance(parent, dict):
                if last not in parent:
                    raise PatchError(
                        f"replace operation does not apply: doc is missing key: {path}: "
                        "missing value"
                    )
                parent[last] = codec.copy(operation["value"])
            elif isinstance(parent, list):
                parent[_index(last, len(parent), allow_end=False)] = codec.copy(operation["value"])
            else:
                raise PatchError(f'replace operation does not apply: doc is missing path: "{path}"')
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(f"{op} operation does not apply: missing from path")
            if op == "move":
                doc, value = _remove(doc, source, op)
            else:
                value = codec.copy(_get(doc, source, op))
            doc = _add(doc, path, value, op)
        elif op == "test":
            if _get(doc, path, op) != operation.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchFormatError(f"Unexpected kind: {op}")
    return doc
