"""Authentication and authorization of HTTP requests, and the APIs that serve them.

``Access`` sits in front of every request when ``ServerConfig.enforce_auth`` is on: it
authenticates the ``Authorization`` header (401 otherwise) and asks the RBAC authorizer
about the request's attributes (403 otherwise), before the path is resolved, as the real
filters do. Off, every request is ``system:admin`` and nothing is checked. Either way it
answers the TokenRequest subresource and the review APIs (``reviews``).

Every decision goes into the access record (``usage``); with ``ServerConfig.access_record``
the server keeps it in that file (:meth:`Access.keep_record`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from aiohttp import web

from sim.kubeapi.auth import identity, reviews, signers
from sim.kubeapi.auth.attributes import Attributes, forbidden, non_resource
from sim.kubeapi.auth.authenticator import Authenticator
from sim.kubeapi.auth.identity import UserInfo
from sim.kubeapi.auth.jwt import Signer
from sim.kubeapi.auth.rbac import RbacAuthorizer
from sim.kubeapi.auth.tokens import ServiceAccountTokens
from sim.kubeapi.auth.usage import AccessUsage
from sim.kubeapi.config import ServerConfig
from sim.kubeapi.http.routing import ResourcePath
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.storage.store import Store

USER_KEY = web.RequestKey("cdo.user", UserInfo)
AUTH_APIS = {
    (reviews.AUTHORIZATION, "subjectaccessreviews"),
    (reviews.AUTHORIZATION, "localsubjectaccessreviews"),
    (reviews.AUTHORIZATION, "selfsubjectaccessreviews"),
    (reviews.AUTHENTICATION, "selfsubjectreviews"),
    (reviews.AUTHENTICATION, "tokenreviews"),
}
RECORD_INTERVAL_S = 1.0
"""How often the access record file is rewritten while it changes."""


class Access:
    def __init__(self, config: ServerConfig, store: Store, *, signer: Signer | None = None) -> None:
        self.enforced = config.enforce_auth
        self.tokens = ServiceAccountTokens(
            store, issuer=config.service_account_issuer, signer=signer
        )
        self.authenticator = Authenticator(
            self.tokens,
            static_tokens={identity.ADMIN_TOKEN: identity.ADMIN},
            anonymous=config.anonymous_auth,
        )
        self.authorizer = RbacAuthorizer(store)
        self.usage = AccessUsage()

    # -- the filters ----------------------------------------------------------------------------

    def authenticate(self, request: web.Request) -> UserInfo:
        """The request's user (kept on the request); raises the 401 when enforced."""
        if not self.enforced:
            user = identity.UNCHECKED
        else:
            user = self.authenticator.authenticate(request.headers.get("Authorization"))
        request[USER_KEY] = user
        return user

    def webhook_user(self, request: web.Request) -> dict[str, Any] | None:
        """The ``userInfo`` admission webhooks see (None: the unchecked default)."""
        user = request.get(USER_KEY)
        return user.as_json() if self.enforced and isinstance(user, UserInfo) else None

    def check_path(self, user: UserInfo, method: str, path: str) -> None:
        if self.enforced:
            self._check(non_resource(user, method, path))

    def check_resource(self, user: UserInfo, info: ResourcePath, verb: str) -> None:
        if not self.enforced:
            return
        name = info.name or ""
        namespace = info.namespace or ""
        if info.group == "" and info.resource == "namespaces" and name:
            namespace = name  # a namespace is addressed inside itself, as RequestInfo has it
        self._check(
            Attributes(
                user=user,
                verb=verb,
                group=info.group,
                resource=info.resource,
                subresource=info.subresource,
                namespace=namespace,
                name=name,
            )
        )

    def check_signer(
        self, request: web.Request, *, verb: str, csr_name: str, signer_name: str
    ) -> None:
        """The CSR signer check (:mod:`sim.kubeapi.auth.signers`) when enforced."""
        if not self.enforced:
            return
        user = request.get(USER_KEY, identity.UNCHECKED)

        def allowed(attrs: Attributes) -> bool:
            if not self.authorizer.authorize(attrs).allowed:
                return False
            self.usage.allowed(attrs)
            return True

        try:
            signers.check_signer(
                allowed, user=user, verb=verb, csr_name=csr_name, signer_name=signer_name
            )
        except errors.ApiError as denied:
            self.usage.denied(
                Attributes(
                    user=user, verb=verb, group=signers.GROUP, resource="signers", name=signer_name
                ),
                denied.message,
            )
            raise

    def _check(self, attrs: Attributes) -> None:
        decision = self.authorizer.authorize(attrs)
        if not decision.allowed:
            denied = forbidden(attrs, decision.reason)
            self.usage.denied(attrs, denied.message)
            raise denied
        self.usage.allowed(attrs)

    # -- the record -----------------------------------------------------------------------------

    def resume_record(self, path: Path) -> None:
        """Go on with the record in ``path``, written before a restart (when there is one)."""
        try:
            self.usage.resume(codec.decode(path.read_bytes()))
        except FileNotFoundError:
            return

    async def keep_record(self, path: Path, *, interval_s: float = RECORD_INTERVAL_S) -> None:
        """Rewrite ``path`` with the access record whenever it changed (at most every
        ``interval_s``) until cancelled, and once more then."""
        written = -1
        try:
            while True:
                if self.usage.version != written:
                    written = self.usage.version
                    self.write_record(path)
                await asyncio.sleep(interval_s)
        finally:
            self.write_record(path)

    def write_record(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(codec.encode(self.usage.snapshot()))
        temporary.replace(path)

    # -- the APIs -------------------------------------------------------------------------------

    @staticmethod
    def serves(info: ResourcePath) -> bool:
        if info.group == "" and info.resource == "serviceaccounts":
            return info.subresource == "token"
        return (info.group, info.resource) in AUTH_APIS and not info.subresource

    def answer(self, request: web.Request, info: ResourcePath, body: Any) -> dict[str, Any]:
        """The response body of a POST to a path ``serves`` accepts."""
        caller = request.get(USER_KEY, identity.UNCHECKED)
        namespace = info.namespace or ""
        if info.resource == "serviceaccounts":
            return self.tokens.request(namespace, info.name or "", body)
        if info.resource == "tokenreviews":
            return reviews.token_review(self.authenticator, body)
        if info.resource == "selfsubjectreviews":
            return reviews.self_subject_review(caller)
        return reviews.access_review(
            self.authorizer, info.resource, body, caller=caller, namespace=namespace
        )
