"""The review APIs: what a user may do (access reviews) and who a credential is (token and
self reviews), answered like the real server: the request comes back with a ``status``.

- ``SubjectAccessReview`` (authorization.k8s.io/v1, cluster-scoped): any user's access;
- ``LocalSubjectAccessReview``: the same, limited to the namespace of its path;
- ``SelfSubjectAccessReview``: the caller's own access (``kubectl auth can-i``);
- ``SelfSubjectReview`` (authentication.k8s.io/v1): the caller (``kubectl auth whoami``);
- ``TokenReview``: who a token is, for the given audiences.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.auth.attributes import Attributes
from sim.kubeapi.auth.authenticator import Authenticator
from sim.kubeapi.auth.identity import UserInfo, user_from_json
from sim.kubeapi.auth.rbac import RbacAuthorizer
from sim.kubeapi.machinery import errors

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
ACCESS_REVIEWS = {
    "subjectaccessreviews": "SubjectAccessReview",
    "localsubjectaccessreviews": "LocalSubjectAccessReview",
    "selfsubjectaccessreviews": "SelfSubjectAccessReview",
}

SELF_FIELDS = ("resourceAttributes", "nonResourceAttributes")


def _spec(body: Any) -> dict[str, Any]:
    spec = body.get("spec") if isinstance(body, dict) else None
    return spec if isinstance(spec, dict) else {}


def _answer(kind: str, group: str, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "apiVersion": f"{group}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


def _invalid(kind: str, group: str, field: str, value: Any, detail: str) -> errors.ApiError:
    return errors.invalid_object(kind, group, "", [errors.invalid(field, value, detail)])


def access_attributes(kind: str, spec: dict[str, Any], user: UserInfo) -> Attributes:
    """The attributes an access review asks about, checked as the real validation does."""
    resource = spec.get("resourceAttributes")
    path = spec.get("nonResourceAttributes")
    if (resource is None) == (path is None):
        raise _invalid(
            kind,
            AUTHORIZATION,
            "spec.resourceAttributes",
            resource,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if isinstance(path, dict):
        return Attributes(
            user=user,
            verb=str(path.get("verb") or ""),
            resource_request=False,
            path=str(path.get("path") or ""),
        )
    attrs = resource if isinstance(resource, dict) else {}
    return Attributes(
        user=user,
        verb=str(attrs.get("verb") or ""),
        group=str(attrs.get("group") or ""),
        resource=str(attrs.get("resource") or ""),
        subresource=str(attrs.get("subresource") or ""),
        namespace=str(attrs.get("namespace") or ""),
        name=str(attrs.get("name") or ""),
    )


def access_review(
    authorizer: RbacAuthorizer, resource: str, body: Any, *, caller: UserInfo, namespace: str
) -> dict[str, Any]:
    kind = ACCESS_REVIEWS[resource]
    spec = _spec(body)
    if resource == "selfsubjectaccessreviews":
        user = caller
        spec = {k: v for k, v in spec.items() if k in SELF_FIELDS}
    else:
        user = user_from_json(spec)
        if not user.name and not user.groups:
            why = "at least one of user or group must be specified"
            raise _invalid(kind, AUTHORIZATION, "spec.user", "", why)
    attrs = access_attributes(kind, spec, user)
    if resource == "localsubjectaccessreviews" and attrs.namespace != namespace:
        raise _invalid(
            kind,
            AUTHORIZATION,
            "spec.resourceAttributes.namespace",
            attrs.namespace,
            "must match metadata.namespace",
        )
    decision = authorizer.authorize(attrs)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    answer = _answer(kind, AUTHORIZATION, spec, status)
    if namespace:
        answer["metadata"]["namespace"] = namespace
    return answer


def self_subject_review(caller: UserInfo) -> dict[str, Any]:
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": f"{AUTHENTICATION}/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": caller.as_json()},
    }


def token_review(authenticator: Authenticator, body: Any) -> dict[str, Any]:
    spec = _spec(body)
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise _invalid("TokenReview", AUTHENTICATION, "spec.token", "", "token must be specified")
    audiences = [str(a) for a in spec.get("audiences") or ()]
    result = authenticator.review(token, audiences)
    if isinstance(result, str):
        status: dict[str, Any] = {"user": {}, "error": result}
    else:
        status = {
            "authenticated": True,
            "user": result.user.as_json(),
            "audiences": list(result.audiences),
        }
    return _answer("TokenReview", AUTHENTICATION, spec, status)
