"""From a request's ``Authorization`` header to a user, as kube-apiserver's chain does it.

Bearer tokens are tried as the static admin token (the one in the kubeconfig the emulator
writes, user ``kubernetes-admin`` in ``system:masters``), then as ServiceAccount tokens. A
request without credentials is ``system:anonymous`` when anonymous requests are allowed,
otherwise, like any credential that does not authenticate, a 401.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sim.kubeapi.auth import identity
from sim.kubeapi.auth.identity import UserInfo
from sim.kubeapi.auth.jwt import MalformedTokenError
from sim.kubeapi.auth.tokens import Authenticated, InvalidTokenError, ServiceAccountTokens
from sim.kubeapi.machinery import errors


class Authenticator:
    def __init__(
        self,
        tokens: ServiceAccountTokens,
        *,
        static_tokens: Mapping[str, UserInfo],
        anonymous: bool,
    ) -> None:
        self.tokens = tokens
        self.static_tokens = dict(static_tokens)
        self.anonymous = anonymous

    def authenticate(self, header: str | None) -> UserInfo:
        """The request's user; raises the 401 ``ApiError`` when it has none."""
        if not header:
            if self.anonymous:
                return identity.ANONYMOUS
            raise errors.unauthorized()
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise errors.unauthorized()
        result = self.review(token)
        if isinstance(result, str):
            raise errors.unauthorized()
        return result.user

    def review(self, token: str, audiences: Sequence[str] = ()) -> Authenticated | str:
        """What a TokenReview says of ``token``: who it is, or why it is not anyone."""
        static = self.static_tokens.get(token)
        if static is not None:
            return Authenticated(user=static, audiences=tuple(audiences) or self.tokens.audiences)
        try:
            return self.tokens.authenticate(token, audiences=audiences or None)
        except MalformedTokenError:
            return "invalid bearer token"
        except InvalidTokenError as exc:
            return f"invalid bearer token, {exc}"
