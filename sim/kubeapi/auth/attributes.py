"""What one request asks to do, as the authorizer sees it, and the 403 the server answers.

Resource requests carry verb, API group, resource, subresource, namespace and name (for a
namespace itself the namespace is its own name, as in the real RequestInfo); other paths
carry the lower-case HTTP method as verb and the path.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.kubeapi.auth.identity import UserInfo
from sim.kubeapi.machinery import errors

NON_RESOURCE_VERBS = {"GET": "get", "HEAD": "get", "POST": "post", "PUT": "put"}


@dataclass(frozen=True, slots=True)
class Attributes:
    user: UserInfo
    verb: str
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


def non_resource(user: UserInfo, method: str, path: str) -> Attributes:
    verb = NON_RESOURCE_VERBS.get(method, method.lower())
    return Attributes(user=user, verb=verb, resource_request=False, path=path)


def forbidden_message(attrs: Attributes) -> str:
    """The authorization filter's sentence (``responsewriters.forbiddenMessage``)."""
    who = f'User "{attrs.user.name}"'
    if not attrs.resource_request:
        return f'{who} cannot {attrs.verb} path "{attrs.path}"'
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return f'{who} cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {where}'


def forbidden(attrs: Attributes, reason: str = "") -> errors.ApiError:
    """403 Forbidden as ``apierrors.NewForbidden`` builds it from the request's attributes."""
    why = forbidden_message(attrs) + (f": {reason}" if reason else "")
    if not attrs.resource_request:
        denied = errors.ApiError(code=403, reason="Forbidden", message=f"forbidden: {why}")
        denied.details = {}  # StatusDetails with every field empty: written as {}
        return denied
    return errors.forbidden_error(attrs.resource, attrs.group, attrs.name, why)
