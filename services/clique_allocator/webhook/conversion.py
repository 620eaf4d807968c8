"""The ComputeDomain conversion webhook: ConversionReview v1 in and out (pure).

kube-apiserver sends ``POST /convert`` a ``ConversionReview`` whenever it reads or writes a
ComputeDomain in a version other than the one stored (``request.uid``,
``request.desiredAPIVersion``, ``request.objects``). Each object is converted by
:func:`shared.crds.conversion.convert`; the answer echoes the uid and lists the converted objects
in order, ``result.status: Success``. An object that cannot be converted fails the review
(``result.status: Failure``, its message naming the field), which kube-apiserver returns to the
client as ``conversion webhook for resource.nvidia.com/<version>, Kind=ComputeDomain failed:
<message>``. A body that is not a ConversionReview with a request is a 400.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from shared.crds.conversion import ConversionError, convert

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"

Result = Literal["converted", "refused", "error"]


class ConversionRequest(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    desired_api_version: str = msgspec.field(name="desiredAPIVersion")
    objects: list[dict[str, Any]] = msgspec.field(default_factory=list)


class ConversionReview(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = REVIEW_API_VERSION
    kind: str = "ConversionReview"
    request: ConversionRequest | None = None


_review_decoder = msgspec.json.Decoder(ConversionReview)


class ConversionReviewError(ValueError):
    """The body is not a ConversionReview v1 with a request."""


def decode_conversion_review(body: bytes) -> ConversionRequest:
    try:
        review = _review_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ConversionReviewError(f"not a ConversionReview: {exc}") from None
    if review.api_version != REVIEW_API_VERSION or review.kind != "ConversionReview":
        raise ConversionReviewError(
            f"expected a ConversionReview of {REVIEW_API_VERSION}, got {review.kind} of "
            f"{review.api_version}"
        )
    if review.request is None:
        raise ConversionReviewError("the ConversionReview has no request")
    return review.request


def answer(request: ConversionRequest) -> tuple[bytes, Result]:
    """The ConversionReview that answers ``request``, and whether it converted or refused."""
    response: dict[str, Any] = {"uid": request.uid}
    result: Result = "converted"
    try:
        response["convertedObjects"] = [
            convert(obj, request.desired_api_version) for obj in request.objects
        ]
        response["result"] = {"status": "Success"}
    except ConversionError as exc:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": str(exc)}
        result = "refused"
    body = {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}
    return json.dumps(body).encode(), result


def respond(body: bytes) -> tuple[int, bytes, Result]:
    """The HTTP status and body answering a request body, and the result to count: 200 with
    the answering ConversionReview, or 400 with why the body is none."""
    try:
        request = decode_conversion_review(body)
    except ConversionReviewError as exc:
        return 400, str(exc).encode(), "error"
    answered, result = answer(request)
    return 200, answered, result
