"""Who a request acts as: the user info authentication yields and authorization reads.

The names are the real server's: ServiceAccounts are ``system:serviceaccount:<ns>:<name>`` in
the groups ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``; every authenticated
user is in ``system:authenticated``; ``system:masters`` passes every authorization check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SA_PREFIX = "system:serviceaccount:"

EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated (or anonymous) user: name, uid, groups and extra values."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_master(self) -> bool:
        return MASTERS in self.groups

    def as_json(self) -> dict[str, Any]:
        """The ``UserInfo`` shape of TokenReview, SelfSubjectReview and AdmissionReview."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ADMIN = UserInfo(name="kubernetes-admin", groups=(MASTERS, AUTHENTICATED))
"""The user of the kubeconfig the emulator writes (what kubeadm's admin.conf carries)."""

ADMIN_TOKEN = "cdo-sim-admin-token"
"""The static bearer token of ``ADMIN`` (the real server's ``--token-auth-file`` kind)."""

UNCHECKED = UserInfo(name="system:admin", groups=(MASTERS, AUTHENTICATED))
"""Who every request is when authentication and authorization are not enforced."""

ANONYMOUS = UserInfo(name="system:anonymous", groups=(UNAUTHENTICATED,))


def service_account_user(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED)


def split_service_account(username: str) -> tuple[str, str] | None:
    """``system:serviceaccount:ns:name`` -> (ns, name); None for other users."""
    if not username.startswith(SA_PREFIX):
        return None
    rest = username[len(SA_PREFIX) :]
    namespace, sep, name = rest.partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def user_from_json(body: Any) -> UserInfo:
    """A ``UserInfo``-shaped spec (SubjectAccessReview's user, groups, uid, extra)."""
    if not isinstance(body, dict):
        return UserInfo(name="")
    extra = body.get("extra") if isinstance(body.get("extra"), dict) else {}
    return UserInfo(
        name=str(body.get("user") or ""),
        uid=str(body.get("uid") or ""),
        groups=tuple(str(g) for g in body.get("groups") or ()),
        extra={str(k): tuple(str(x) for x in v or ()) for k, v in (extra or {}).items()},
    )
