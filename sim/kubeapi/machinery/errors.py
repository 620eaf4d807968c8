"""API errors as the real server reports them: a ``Status`` object with code and reason.

Hierarchy::

    ApiError                      any failed request; carries the Status body
    FieldError (not an exception) one problem with one field; many make an Invalid error

Every constructor below produces the exact message shape of the Kubernetes API server,
for example ``pods "x" not found`` or ``Operation cannot be fulfilled on pods "x": ...``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sim.kubeapi.machinery import codec

CONFLICT_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class ApiError(Exception):
    """A request that fails with a ``Status`` body."""

    def __init__(
        self,
        *,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details) if details else None
        self.headers = dict(headers) if headers else {}

    def status(self) -> dict[str, Any]:
        """The metav1.Status body, keys in the order the real server writes them."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code} {self.reason}: {self.message})"


def success_status(
    *, details: Mapping[str, Any] | None = None, code: int | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    body["status"] = "Success"
    if details is not None:
        body["details"] = dict(details)
    if code is not None:
        body["code"] = code
    return body


# -- field errors -------------------------------------------------------------------------------


class FieldErrorType(enum.Enum):
    """(cause reason, text) of each field.ErrorType."""

    NOT_FOUND = ("FieldValueNotFound", "Not found")
    REQUIRED = ("FieldValueRequired", "Required value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    TOO_MANY = ("FieldValueTooMany", "Too many")
    INTERNAL = ("InternalError", "Internal error")
    TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def text(self) -> str:
        return self.value[1]


_NO_VALUE: Any = object()
_VALUELESS = {
    FieldErrorType.REQUIRED,
    FieldErrorType.FORBIDDEN,
    FieldErrorType.TOO_LONG,
    FieldErrorType.INTERNAL,
}


def format_value(value: Any) -> str:
    """Render a bad value the way the Go server prints it in messages."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return codec.encode(value).decode()
    return codec.encode(value).decode()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field: rendered as ``<field>: <Type>[: <value>][: <detail>]``."""

    type: FieldErrorType
    field: str
    value: Any = dataclasses.field(default=_NO_VALUE)
    detail: str = ""

    def body(self) -> str:
        if self.type in _VALUELESS or self.value is _NO_VALUE:
            text = self.type.text
        else:
            text = f"{self.type.text}: {format_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": self.type.reason, "message": self.body(), "field": self.field}


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.REQUIRED, path, detail=detail)


def invalid(path: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.INVALID, path, value, detail)


def type_invalid(path: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.TYPE_INVALID, path, value, detail)


def forbidden(path: str, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.FORBIDDEN, path, detail=detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(FieldErrorType.DUPLICATE, path, value)


def not_found_field(path: str, value: Any) -> FieldError:
    return FieldError(FieldErrorType.NOT_FOUND, path, value)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    options = ", ".join(format_value(s) for s in supported)
    detail = f"supported values: {options}" if options else ""
    return FieldError(FieldErrorType.NOT_SUPPORTED, path, value, detail)


def too_long(path: str, max_length: int) -> FieldError:
    return FieldError(
        FieldErrorType.TOO_LONG, path, detail=f"may not be more than {max_length} bytes"
    )


def too_many(path: str, actual: int, maximum: int) -> FieldError:
    return FieldError(FieldErrorType.TOO_MANY, path, actual, f"must have at most {maximum} items")


def immutable(path: str, value: Any) -> FieldError:
    return invalid(path, value, "field is immutable")


# -- qualified names ----------------------------------------------------------------------------


def qualified(name: str, group: str) -> str:
    """``pods`` / ``deployments.apps`` (GroupResource) or ``Pod`` / ``Deployment.apps``."""
    return f"{name}.{group}" if group else name


def _resource_details(resource: str, group: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name is not None:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


# -- constructors, one per StatusReason ---------------------------------------------------------


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        code=404,
        reason="NotFound",
        message=f'{qualified(resource, group)} "{name}" not found',
        details=_resource_details(resource, group, name),
    )


def path_not_found() -> ApiError:
    return ApiError(
        code=404,
        reason="NotFound",
        message="the server could not find the requested resource",
        details={},
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        code=409,
        reason="AlreadyExists",
        message=f'{qualified(resource, group)} "{name}" already exists',
        details=_resource_details(resource, group, name),
    )


def conflict(resource: str, group: str, name: str, why: str = CONFLICT_MODIFIED) -> ApiError:
    return ApiError(
        code=409,
        reason="Conflict",
        message=f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_resource_details(resource, group, name),
    )


def apply_conflict(causes: list[dict[str, str]], message: str) -> ApiError:
    return ApiError(code=409, reason="Conflict", message=message, details={"causes": causes})


def invalid_object(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    if not errors:
        message = f'{qualified(kind, group)} "{name}" is invalid'
    elif len(errors) == 1:
        message = f'{qualified(kind, group)} "{name}" is invalid: {errors[0]}'
    else:
        joined = ", ".join(str(e) for e in errors)
        message = f'{qualified(kind, group)} "{name}" is invalid: [{joined}]'
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [e.cause() for e in errors]
    return ApiError(code=422, reason="Invalid", message=message, details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(code=400, reason="BadRequest", message=message)


def forbidden_error(resource: str, group: str, name: str, why: str, **extra: Any) -> ApiError:
    target = qualified(resource, group)
    subject = f'{target} "{name}"' if name else target
    details = _resource_details(resource, group, name or None)
    details.update(extra)
    return ApiError(
        code=403, reason="Forbidden", message=f"{subject} is forbidden: {why}", details=details
    )


def method_not_allowed(resource: str, group: str, action: str) -> ApiError:
    return ApiError(
        code=405,
        reason="MethodNotAllowed",
        message=f'{action} is not supported on resources of kind "{qualified(resource, group)}"',
        details=_resource_details(resource, group, None),
    )


def expired(message: str) -> ApiError:
    return ApiError(code=410, reason="Expired", message=message)


def too_old_resource_version(requested: int, oldest: int) -> ApiError:
    return expired(f"too old resource version: {requested} ({oldest})")


def too_many_requests(message: str, retry_after: int) -> ApiError:
    return ApiError(
        code=429,
        reason="TooManyRequests",
        message=message,
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal_error(cause: str) -> ApiError:
    return ApiError(
        code=500,
        reason="InternalError",
        message=f"Internal error occurred: {cause}",
        details={"causes": [{"message": cause}]},
    )


def timeout(
    message: str, retry_after: int = 0, causes: list[dict[str, str]] | None = None
) -> ApiError:
    details: dict[str, Any] = {}
    if causes:
        details["causes"] = causes
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(code=504, reason="Timeout", message=f"Timeout: {message}", details=details)


def unsupported_media_type(content_type: str, accepted: Iterable[str]) -> ApiError:
    return ApiError(
        code=415,
        reason="UnsupportedMediaType",
        message=(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}"
        ),
    )


def not_acceptable(accepted: Iterable[str]) -> ApiError:
    return ApiError(
        code=406,
        reason="NotAcceptable",
        message=f"only the following media types are accepted: {', '.join(accepted)}",
    )


def invalid_options(kind: str, errors: list[FieldError]) -> ApiError:
    """Bad query options (ListOptions, PatchOptions ...) are reported against meta.k8s.io."""
    return invalid_object(kind, "meta.k8s.io", "", errors)


def unauthorized() -> ApiError:
    """401: no valid credential (the real server says no more than this)."""
    return ApiError(code=401, reason="Unauthorized", message="Unauthorized")
