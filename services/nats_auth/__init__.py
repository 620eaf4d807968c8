"""NATS authenticator: the auth callout that turns a pod's ServiceAccount token into a NATS
user allowed to publish only what that pod owns (docs/events.md, "Who may publish").

    request = parse_request(data, issuer=..., now=...)     # protocol: the server's request
    reviewed = await review(kube, token, audience="nats")  # review: TokenReview -> Identity
    decision = permissions_for(policy, reviewed.identity)  # permissions: pure, the policy
    user_jwt(...), response(...)                           # protocol: the signed answer

:class:`Authenticator` (``callout``) runs it for every request on ``$SYS.REQ.USER.AUTH``;
``nkeyjwt`` encodes and checks NATS JWTs.
"""

from services.nats_auth.callout import Authenticator, CalloutMetrics
from services.nats_auth.permissions import (
    Identity,
    Permissions,
    Policy,
    Refused,
    admin_permissions,
    consumer_name,
    permissions_for,
    reader_permissions,
)
from services.nats_auth.protocol import MalformedRequestError, parse_request, response, user_jwt
from services.nats_auth.review import NotAuthenticatedError, Reviewed, ReviewFailedError, review

__all__ = [
    "Authenticator",
    "CalloutMetrics",
    "Identity",
    "MalformedRequestError",
    "NotAuthenticatedError",
    "Permissions",
    "Policy",
    "Refused",
    "ReviewFailedError",
    "Reviewed",
    "admin_permissions",
    "consumer_name",
    "parse_request",
    "permissions_for",
    "reader_permissions",
    "response",
    "review",
    "user_jwt",
]
