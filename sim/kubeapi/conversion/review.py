"""The ``ConversionReview`` exchange of one object, and kube-apiserver's checks on the answer.

Pure: what is sent, and what an answer must be for its converted object to be used. Every
failure is a :class:`ConversionFailedError` whose text is the message kube-apiserver's webhook
converter (``apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go``) returns,
naming the object's group, version and kind as it was before conversion::

    conversion webhook for <group>/<version>, Kind=<kind> failed: <why>

Checks, in the converter's order: the answer is a ``ConversionReview`` of the version sent
(v1 only), it has a ``response``, ``response.uid`` echoes the request's, ``result.status`` is
``Success`` (else its ``message`` is the error), exactly one object came back, in the desired
group and version, of the same kind, name, namespace and uid; and only ``labels`` and
``annotations`` of its metadata are taken (valid ones), the rest of the metadata is the
original's.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import codec, names

Obj = dict[str, Any]

REVIEW_VERSIONS = ("v1", "v1beta1")
"""``ConversionReview`` versions the server speaks (apiextensions.k8s.io)."""
TIMEOUT_S = 30
"""kube-apiserver's timeout for a conversion call (sent as ``?timeout=30s``)."""


class ConversionFailedError(Exception):
    """A conversion that failed; ``str()`` is kube-apiserver's message."""


def gvk_text(obj: Obj) -> str:
    """``<group>/<version>, Kind=<kind>`` as Go prints a GroupVersionKind."""
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={obj.get('kind') or ''}"


def review_version(accepted: tuple[str, ...]) -> str | None:
    """The first of the CRD's ``conversionReviewVersions`` the server speaks."""
    return next((v for v in accepted if v in REVIEW_VERSIONS), None)


def request(version: str, uid: str, desired: str, obj: Obj) -> Obj:
    """The ``ConversionReview`` sent to convert ``obj`` to ``desired`` (``group/version``)."""
    return {
        "apiVersion": f"apiextensions.k8s.io/{version}",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [obj]},
    }


def converted(answer: Any, *, version: str, uid: str, original: Obj, desired: str) -> Obj:
    """The converted object in ``answer``, with the original's metadata restored apart from
    labels and annotations; ConversionFailedError when kube-apiserver would refuse it."""
    gvk = gvk_text(original)
    try:
        objects = _objects(answer, version=version, uid=uid)
    except ConversionFailedError as exc:
        raise ConversionFailedError(f"conversion webhook for {gvk} failed: {exc}") from None
    if len(objects) != 1:
        raise ConversionFailedError(
            f"conversion webhook for {gvk} returned {len(objects)} objects, expected 1"
        )
    out = objects[0]
    if not isinstance(out, dict):
        raise ConversionFailedError(
            f"conversion webhook for {gvk} returned invalid object at index 0: "
            f"cannot unmarshal {codec.encode(out).decode()} into an object"
        )
    if not out.get("kind"):
        raise ConversionFailedError(f"Object 'Kind' is missing in '{codec.encode(out).decode()}'")
    got = str(out.get("apiVersion") or "")
    if got != desired:
        raise ConversionFailedError(
            f"conversion webhook for {gvk} returned invalid object at index 0: invalid "
            f"groupVersion (expected {desired}, received {got})"
        )
    if out.get("kind") != original.get("kind"):
        raise ConversionFailedError(
            f"conversion webhook for {gvk} returned invalid object at index 0: invalid kind "
            f"(expected {original.get('kind')}, received {out.get('kind')})"
        )
    if (why := _identity_changed(original, out)) is not None:
        raise ConversionFailedError(f"conversion webhook for {gvk} returned invalid object: {why}")
    try:
        out["metadata"] = _restored_metadata(original, out)
    except ConversionFailedError as exc:
        raise ConversionFailedError(
            f"conversion webhook for {gvk} returned invalid metadata: {exc}"
        ) from None
    return out


def _objects(answer: Any, *, version: str, uid: str) -> list[Any]:
    """``response.convertedObjects`` once the answer is a successful one for this request."""
    if not isinstance(answer, dict):
        raise ConversionFailedError("unrecognized response type")
    if version == "v1":
        expected = "apiextensions.k8s.io/v1, Kind=ConversionReview"
        if gvk_text(answer) != expected:
            raise ConversionFailedError(
                f"expected webhook response of {expected}, got {gvk_text(answer)}"
            )
    response = answer.get("response")
    if not isinstance(response, dict):
        raise ConversionFailedError("no response provided")
    if version == "v1" and response.get("uid") != uid:
        raise ConversionFailedError(
            f"expected response.uid={_quoted(uid)}, got {_quoted(response.get('uid') or '')}"
        )
    answered = response.get("result")
    result: Obj = answered if isinstance(answered, dict) else {}
    status = result.get("status") or ""
    if status != "Success":
        if result.get("message"):
            raise ConversionFailedError(str(result["message"]))
        raise ConversionFailedError(f"response.result.status was '{status}', not 'Success'")
    objects = response.get("convertedObjects")
    return list(objects) if isinstance(objects, list) else []


def _quoted(value: Any) -> str:
    return codec.encode(str(value)).decode()


def _identity_changed(original: Obj, out: Obj) -> str | None:
    """The first of kind, name, namespace and uid that the conversion changed."""
    before, after = original.get("metadata") or {}, out.get("metadata") or {}
    if not isinstance(after, dict):
        after = {}
    pairs = (
        ("kind", original.get("kind"), out.get("kind")),
        ("name", before.get("name"), after.get("name")),
        ("namespace", before.get("namespace"), after.get("namespace")),
        ("UID", before.get("uid"), after.get("uid")),
    )
    for what, expected, got in pairs:
        if (expected or "") != (got or ""):
            return f"must have the same {what}: {expected or ''} != {got or ''}"
    return None


def _restored_metadata(original: Obj, out: Obj) -> Obj:
    """The original's metadata with the converted object's labels and annotations."""
    answered = out.get("metadata")
    if answered is None:
        raise ConversionFailedError("missing metadata in converted object")
    if not isinstance(answered, dict):
        raise ConversionFailedError(
            f"invalid metadata of type {type(answered).__name__} in converted object"
        )
    restored: Obj = codec.copy(original.get("metadata") or {})
    for key, validate, path in (
        ("labels", names.validate_labels, "metadata.labels"),
        ("annotations", names.validate_annotations, "metadata.annotation"),
    ):
        value = answered.get(key)
        if value is None:
            restored.pop(key, None)
            continue
        if not isinstance(value, dict):
            raise ConversionFailedError(
                f"invalid metadata.{key} of type {type(value).__name__} in converted object"
            )
        for field, item in value.items():
            if not isinstance(item, str):
                raise ConversionFailedError(
                    f"metadata.{key}[{field}] must be a string, but is "
                    f"{type(item).__name__} in converted object"
                )
        if value != (restored.get(key) or {}):
            problems = validate(value, path)
            if problems:
                text = [str(p) for p in problems]
                raise ConversionFailedError(text[0] if len(text) == 1 else f"[{', '.join(text)}]")
        restored[key] = value
    return restored
