"""ServiceAccount tokens: TokenRequest issues them, authentication checks them.

A token is a JWT (``jwt.Signer``) with the real server's claims: ``iss``, ``sub``
(``system:serviceaccount:<ns>:<name>``), ``aud``, ``exp``/``iat``/``nbf``, ``jti`` and the
private ``kubernetes.io`` claim naming the namespace, the ServiceAccount and the object the
token is bound to (a Pod, a Secret or a Node), plus, for a Pod on a node, that node. Checking
a token is the real validator's: the signature and issuer, an audience the caller accepts,
expiry with the 60 s leeway of go-jose, and that the ServiceAccount and the bound object
still exist with the uids in the token (an object marked for deletion more than 60 s ago
counts as gone).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sim.kubeapi.auth import identity
from sim.kubeapi.auth.identity import UserInfo
from sim.kubeapi.auth.jwt import MalformedTokenError, Signer
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.storage.store import Entry, Store

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION_S = 3600
MIN_EXPIRATION_S = 600
MAX_EXPIRATION_S = 2**32
LEEWAY_S = 60
VERIFIED_LIMIT = 4096
BINDABLE = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}


class InvalidTokenError(Exception):
    """A well-formed request whose token does not authenticate (the reason is not shown)."""


@dataclass(frozen=True, slots=True)
class Authenticated:
    user: UserInfo
    audiences: tuple[str, ...]


class ServiceAccountTokens:
    """Issue and check ServiceAccount tokens against the objects in ``store``.

    ``clock`` (seconds since the epoch) is what both sides read as now; tests move it to
    make tokens expire.
    """

    def __init__(
        self, store: Store, *, issuer: str = DEFAULT_ISSUER, signer: Signer | None = None
    ) -> None:
        self.store = store
        self.issuer = issuer
        self.audiences: tuple[str, ...] = (issuer,)
        self.signer = signer or Signer()
        self.clock: Callable[[], float] = time.time
        # Signatures already checked: a client sends the same token on every request.
        self._verified: dict[str, dict[str, Any]] = {}

    # -- TokenRequest ---------------------------------------------------------------------------

    def request(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """Answer ``POST serviceaccounts/<name>/token`` (the TokenRequest with its status)."""
        spec = body.get("spec") if isinstance(body, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        sa = self._entry("serviceaccounts", namespace, name)
        if sa is None:
            raise errors.not_found("serviceaccounts", "", name)
        audiences = [str(a) for a in spec.get("audiences") or ()] or list(self.audiences)
        seconds = spec.get("expirationSeconds", DEFAULT_EXPIRATION_S)
        _check_expiration(name, seconds)
        k8s: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": sa.uid},
        }
        ref = spec.get("boundObjectRef")
        if ref is not None:
            k8s.update(self._binding(namespace, name, ref))
        now = int(self.clock())
        jti = str(uuid.uuid4())
        claims = {
            "aud": audiences,
            "exp": now + seconds,
            "iat": now,
            "iss": self.issuer,
            "jti": jti,
            "kubernetes.io": k8s,
            "nbf": now,
            "sub": identity.service_account_user(namespace, name),
        }
        expires = dt.datetime.fromtimestamp(now + seconds, tz=dt.UTC)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": {**spec, "audiences": audiences, "expirationSeconds": seconds},
            "status": {
                "token": self.signer.sign(claims),
                "expirationTimestamp": codec.format_time(expires),
            },
        }

    def _binding(self, namespace: str, sa_name: str, ref: Any) -> dict[str, Any]:
        """The private claims naming the bound object (and a pod's node)."""
        ref = ref if isinstance(ref, dict) else {}
        kind = str(ref.get("kind") or "")
        api_version = str(ref.get("apiVersion") or "")
        resource = BINDABLE.get(kind) if api_version in ("", "v1") else None
        if resource is None:
            group, _, version = api_version.rpartition("/")
            raise errors.bad_request(
                f'cannot bind token for serviceaccount "{sa_name}" to object of type '
                f"{group}/{version}, Kind={kind}"
            )
        obj_name = str(ref.get("name") or "")
        entry = self._entry(resource, "" if kind == "Node" else namespace, obj_name)
        if entry is None:
            raise errors.not_found(resource, "", obj_name)
        if ref.get("uid") and ref["uid"] != entry.uid:
            raise errors.conflict(
                kind,
                "",
                obj_name,
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID "
                "in record. The object might have been deleted and then recreated",
            )
        out: dict[str, Any] = {kind.lower(): {"name": obj_name, "uid": entry.uid}}
        if kind == "Pod":
            if entry.fields.get("spec.serviceAccountName", "") != sa_name:
                raise errors.bad_request(
                    f'cannot bind token for serviceaccount "{sa_name}" to pod running with '
                    "different serviceaccount name."
                )
            node_name = entry.fields.get("spec.nodeName", "")
            node = self._entry("nodes", "", node_name) if node_name else None
            if node is not None:
                out["node"] = {"name": node_name, "uid": node.uid}
        return out

    # -- authentication -------------------------------------------------------------------------

    def authenticate(self, token: str, *, audiences: Sequence[str] | None = None) -> Authenticated:
        """The user a token stands for; raises ``InvalidTokenError`` or ``MalformedTokenError``."""
        claims = self._verified.get(token)
        if claims is None:
            claims = self.signer.verify(token)
            if len(self._verified) >= VERIFIED_LIMIT:
                self._verified.clear()
            self._verified[token] = claims
        if claims.get("iss") != self.issuer:
            raise InvalidTokenError("issuer")
        wanted = tuple(audiences) if audiences else self.audiences
        token_audiences = claims.get("aud")
        if isinstance(token_audiences, str):
            token_audiences = [token_audiences]
        accepted = tuple(a for a in wanted if a in (token_audiences or ()))
        if not accepted:
            raise InvalidTokenError("audience")
        now = self.clock()
        if _number(claims, "exp") + LEEWAY_S < now:
            raise InvalidTokenError("service account token has expired")
        if _number(claims, "nbf") - LEEWAY_S > now:
            raise InvalidTokenError("service account token is not valid yet")
        return Authenticated(user=self._user(claims, now), audiences=accepted)

    def _user(self, claims: dict[str, Any], now: float) -> UserInfo:
        k8s = claims.get("kubernetes.io")
        if not isinstance(k8s, dict):
            raise InvalidTokenError("no kubernetes.io claim")
        namespace = str(k8s.get("namespace") or "")
        sa = _ref(k8s, "serviceaccount")
        if sa is None:
            raise InvalidTokenError("no serviceaccount claim")
        self._still_there("serviceaccounts", namespace, sa, now)
        extra: dict[str, tuple[str, ...]] = {}
        for kind, resource in (("pod", "pods"), ("secret", "secrets")):
            bound = _ref(k8s, kind)
            if bound is not None:
                self._still_there(resource, namespace, bound, now)
                if kind == "pod":
                    extra[identity.EXTRA_POD_NAME] = (bound[0],)
                    extra[identity.EXTRA_POD_UID] = (bound[1],)
        node = _ref(k8s, "node")
        if node is not None and _ref(k8s, "pod") is None:
            # A token bound to the node itself lives as long as that node does; a pod's token
            # only names the node its pod was on.
            self._still_there("nodes", "", node, now)
        if node is not None:
            extra[identity.EXTRA_NODE_NAME] = (node[0],)
            extra[identity.EXTRA_NODE_UID] = (node[1],)
        if claims.get("jti"):
            extra[identity.EXTRA_CREDENTIAL_ID] = (f"JTI={claims['jti']}",)
        return UserInfo(
            name=identity.service_account_user(namespace, sa[0]),
            uid=sa[1],
            groups=identity.service_account_groups(namespace),
            extra=dict(sorted(extra.items())),
        )

    def _still_there(self, resource: str, namespace: str, ref: tuple[str, str], now: float) -> None:
        entry = self._entry(resource, namespace, ref[0])
        if entry is None or entry.uid != ref[1]:
            raise InvalidTokenError(f"{resource} {namespace}/{ref[0]} is gone")
        if entry.deleting:
            marked = (entry.obj().get("metadata") or {}).get("deletionTimestamp")
            if marked and codec.parse_time(marked).timestamp() < now - LEEWAY_S:
                raise InvalidTokenError(f"{resource} {namespace}/{ref[0]} has been deleted")

    def _entry(self, resource: str, namespace: str, name: str) -> Entry | None:
        bucket = self.store.buckets.get(resource)
        return bucket.get(namespace, name) if bucket is not None else None


def _check_expiration(name: str, seconds: Any) -> None:
    problem = ""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        problem = "must be an integer"
    elif seconds < MIN_EXPIRATION_S:
        problem = "may not specify a duration less than 10 minutes"
    elif seconds > MAX_EXPIRATION_S:
        problem = "may not specify a duration larger than 2^32 seconds"
    if problem:
        raise errors.invalid_object(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            [errors.invalid("spec.expirationSeconds", seconds, problem)],
        )


def _number(claims: dict[str, Any], key: str) -> float:
    value = claims.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidTokenError(f"no {key} claim")
    return float(value)


def _ref(k8s: dict[str, Any], key: str) -> tuple[str, str] | None:
    value = k8s.get(key)
    if not isinstance(value, dict) or not value.get("name"):
        return None
    return str(value["name"]), str(value.get("uid") or "")


__all__ = ["Authenticated", "InvalidTokenError", "MalformedTokenError", "ServiceAccountTokens"]
