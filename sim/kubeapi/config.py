"""Settings of one emulated API server, grouped in one documented struct."""

from __future__ import annotations

from typing import TypedDict

import msgspec

from sim.kubeapi.releases import NEWEST_RELEASE, Release
from sim.kubeapi.releases.apis import parse_runtime_config
from sim.kubeapi.releases.gates import parse_feature_gates
from sim.kubeapi.releases.release import release_minor

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How the emulator behaves where a real cluster has knobs or timing.

    watch_window:
        events kept per resource for resuming watches; a watch (or an exact list) from a
        resourceVersion whose successors were dropped gets ``410 Expired``.
    bookmark_interval_s:
        how often a watch with ``allowWatchBookmarks=true`` receives a BOOKMARK (the real
        server sends one about every minute).
    default_watch_timeout_s:
        server-side end of a watch without ``timeoutSeconds`` (the real one picks 30-60 min).
    too_large_rv_wait_s:
        how long a list or watch asking for a resourceVersion newer than the store waits
        before ``504 Timeout`` (the real server waits 3 s).
    watch_coalesce_s:
        after a watcher wakes for new events it waits this long before writing, so that a
        burst of writes goes out in one chunk (fewer system calls under load).
    pod_graceful_deletion:
        when true, deleting a pod that is bound to a node only marks it (deletionTimestamp
        plus grace period) and a kubelet must finish with ``gracePeriodSeconds=0``, as on a
        real cluster; when false such pods go at once.
    create_default_service_accounts:
        create the ``default`` ServiceAccount in every new namespace, like the real
        service-account controller.
    webhook_service_hosts:
        ``"<namespace>/<service>" -> "host:port"`` used to reach webhooks configured with a
        ``service`` reference (there is no cluster DNS here); TLS is still checked against
        ``<service>.<namespace>.svc``.
    default_toleration_seconds:
        the DefaultTolerationSeconds admission plugin: a pod created or updated without a
        toleration for the ``node.kubernetes.io/not-ready`` or ``node.kubernetes.io/unreachable``
        NoExecute taint gets one (``operator: Exists``) for this many seconds, as with the
        real server's ``--default-not-ready-toleration-seconds`` /
        ``--default-unreachable-toleration-seconds`` (both 300); None turns the plugin off.
    enforce_auth:
        authenticate every request and authorize it with RBAC, as kube-apiserver does with
        ``--authorization-mode=RBAC``: the kubeconfig's admin token is ``kubernetes-admin``
        in ``system:masters`` (which passes every check), ServiceAccount tokens from the
        TokenRequest API are their ServiceAccounts; no valid credential is a 401, a request
        RBAC does not allow a 403. When false (the default) every request acts as
        ``system:admin`` and nothing is checked, as before.
    anonymous_auth:
        with ``enforce_auth``, a request without credentials is ``system:anonymous`` (group
        ``system:unauthenticated``, which may read health and version) instead of a 401, as
        with the real server's ``--anonymous-auth``.
    service_account_issuer:
        the ``iss`` of ServiceAccount tokens and the audience they are accepted for.
    tls:
        serve HTTPS with a certificate from a throwaway CA that the written kubeconfig
        trusts; None (the default) means "when ``enforce_auth`` is on", since kubectl sends
        no bearer token over plain HTTP. Raw clients may turn it off to send tokens in clear.
    access_record:
        a file where the server keeps its access record: per user, every distinct (verb,
        API group, resource, subresource) it authorized and every request it refused with
        403 (``auth/usage.py`` has the format), rewritten while it changes and when the
        server stops; "" (the default) keeps none. Only requests checked with
        ``enforce_auth`` are recorded.
    audit_log:
        a file to which the server appends, as kube-apiserver's ``--audit-log-path`` does, one
        ``audit.k8s.io/v1`` Event (a JSON line) per request whose admission policies recorded
        a failed validation under the ``Audit`` action (``admission/auditlog.py``); "" (the
        default) keeps none (the records stay in memory).
    data_dir:
        a directory where the server keeps its objects, resourceVersions and keys
        (``storage/datadir.py``), so that a server started again with it is the same server,
        as kube-apiserver is over etcd: objects, uids and resourceVersions as they were, tokens
        and kubeconfigs still valid, the watch history gone (an older resourceVersion is
        ``410 Expired``); "" (the default) keeps everything in memory.
    namespaces:
        namespaces present at start.
    kubernetes_version:
        the Kubernetes release presented (``1.34`` to ``1.37``): what ``/version`` reports,
        the optional APIs served, the feature gates' defaults and the published schemas
        (:mod:`sim.kubeapi.releases`, docs/kubeapi.md).
    feature_gates:
        gate -> value, as kube-apiserver's ``--feature-gates`` (DRA gates only).
    runtime_config:
        ``<group>/<version>[/<resource>]`` or ``api/all|ga|beta|alpha`` -> on/off, as
        kube-apiserver's ``--runtime-config`` (``resource.k8s.io`` versions only).
    """

    watch_window: int = 10_000
    bookmark_interval_s: float = 60.0
    default_watch_timeout_s: float = 1800.0
    too_large_rv_wait_s: float = 3.0
    watch_coalesce_s: float = 0.005
    pod_graceful_deletion: bool = False
    create_default_service_accounts: bool = True
    webhook_service_hosts: dict[str, str] = msgspec.field(default_factory=dict)
    default_toleration_seconds: int | None = 300
    enforce_auth: bool = False
    anonymous_auth: bool = False
    service_account_issuer: str = "https://kubernetes.default.svc.cluster.local"
    tls: bool | None = None
    access_record: str = ""
    audit_log: str = ""
    data_dir: str = ""
    namespaces: tuple[str, ...] = DEFAULT_NAMESPACES
    kubernetes_version: str = NEWEST_RELEASE
    feature_gates: dict[str, bool] = msgspec.field(default_factory=dict)
    runtime_config: dict[str, bool] = msgspec.field(default_factory=dict)

    def release(self) -> Release:
        """The release these settings present; ReleaseError when kube-apiserver would refuse
        them at start."""
        return Release.of(
            self.kubernetes_version,
            feature_gates=self.feature_gates,
            runtime_config=self.runtime_config,
        )

    @property
    def serves_tls(self) -> bool:
        return self.enforce_auth if self.tls is None else self.tls


class ReleaseSettings(TypedDict):
    kubernetes_version: str
    feature_gates: dict[str, bool]
    runtime_config: dict[str, bool]


def release_settings(version: str, feature_gates: str, runtime_config: str) -> ReleaseSettings:
    """The ServerConfig fields of the three flags as kube-apiserver spells them
    (``--kubernetes-version 1.35 --feature-gates A=true --runtime-config g/v=true``);
    ReleaseError for what kube-apiserver refuses to parse."""
    return {
        "kubernetes_version": f"1.{release_minor(version)}",
        "feature_gates": parse_feature_gates(feature_gates),
        "runtime_config": parse_runtime_config(runtime_config),
    }
