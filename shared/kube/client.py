"""A thin Kubernetes client: raw JSON in and out over kubernetes-asyncio's transport.

kubernetes-asyncio provides configuration, authentication and the HTTP session; everything else
goes through :meth:`KubeClient.request` with ``_preload_content=False`` so responses are decoded by
the caller with msgspec into the Structs it needs (far faster than the generated models), and
errors are raised as :class:`KubeApiError` with the server's Status.

A leader-elected controller writes through a *fenced* view of its client
(:meth:`KubeClient.fenced`): every write first asks how long this replica may still act as
leader, is refused with LeadershipLostError when that is no time at all, and otherwise gets no
longer than that to finish; its ``timeout`` option carries the same deadline to the API server,
which answers 504 rather than apply it later. So a leader that could not renew in time (stalled,
frozen, cut off) has nothing applied once its renew deadline has passed, which comes before any
other replica may take the Lease over (shared/kube/leader.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from shared.errors import LeadershipLostError
from shared.kube import kubeconfig as kubeconfig_files
from shared.kube.errors import KubeApiError
from shared.kube.kubeconfig import ClusterSource
from shared.kube.resources import Resource

if TYPE_CHECKING:
    from shared.metrics import Metrics

PatchType = Literal["merge", "json", "strategic", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

LeaseLeft = Callable[[], float]
"""Seconds this replica may still write as leader (0 or less: none)."""


class KubeClient:
    """Requests against one API server. Create with :meth:`connect`; close when done."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        request_timeout_s: float = 30.0,
        lease_left: LeaseLeft | None = None,
    ) -> None:
        self._api = api
        self._timeout = request_timeout_s
        self._lease_left = lease_left
        self._metrics: Metrics | None = None
        _skip_env_lookups_when_unused(api)

    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: str | Path | Sequence[str | Path] | None = None,
        context: str | None = None,
        request_timeout_s: float = 30.0,
    ) -> KubeClient:
        """From kubeconfig files (one, or several merged as client-go merges them; their
        ``context``, else the current one), else the in-cluster service account."""
        if kubeconfig is None or (not isinstance(kubeconfig, str | Path) and not kubeconfig):
            source = kubeconfig_files.in_cluster()
        else:
            paths = [kubeconfig] if isinstance(kubeconfig, str | Path) else list(kubeconfig)
            source = ClusterSource(
                files=tuple(Path(path) for path in paths), origin="kubeconfig", context=context
            )
        return await cls.connect_to(source, request_timeout_s=request_timeout_s)

    @classmethod
    async def connect_to(
        cls, source: ClusterSource, *, request_timeout_s: float = 30.0
    ) -> KubeClient:
        """A client for ``source``; KubeconfigError when its files name no usable context, the
        loader's own errors for credentials it cannot use."""
        configuration = k8s.Configuration()
        if source.in_cluster:
            account = source.service_account_dir
            host, port = source.service
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=str(account / "token"),
                cert_filename=str(account / "ca.crt"),
                environ={
                    kubeconfig_files.SERVICE_HOST_ENV: host,
                    kubeconfig_files.SERVICE_PORT_ENV: port,
                },
            )
        else:
            config = await asyncio.to_thread(kubeconfig_files.load_for, source)
            await k8s_config.load_kube_config_from_dict(
                config, context=source.context, client_configuration=configuration
            )
        return cls(k8s.ApiClient(configuration), request_timeout_s=request_timeout_s)

    def fenced(self, lease_left: LeaseLeft) -> KubeClient:
        """This client, for a leader's writes: each write is refused once ``lease_left()`` is
        no longer positive and times out when it ends (the module docstring). It shares this
        client's connections; close this client, not the view."""
        view = KubeClient(self._api, request_timeout_s=self._timeout, lease_left=lease_left)
        view._metrics = self._metrics
        return view

    def count_requests(self, metrics: Metrics) -> None:
        """Count every request from now on in ``metrics`` (``rest_client_requests_total`` by
        method and status code): what a service asks of the API server, per minute on a
        dashboard. The client's fenced views count in the same place."""
        self._metrics = metrics

    @property
    def api_client(self) -> k8s.ApiClient:
        """The kubernetes-asyncio client, for code that wants its typed APIs."""
        return self._api

    async def close(self) -> None:
        await self._api.close()

    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object | None = None,
        content_type: str = "application/json",
        request_timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> aiohttp.ClientResponse:
        timeout = request_timeout if request_timeout is not None else self._timeout
        if self._lease_left is not None and method in WRITE_METHODS:
            left = self._lease_left()
            if left <= 0:
                raise LeadershipLostError(
                    f"{method} {path} refused: not leading (the Lease's renew deadline passed)"
                )
            if isinstance(timeout, float | int):
                timeout = min(float(timeout), left)
            # The server holds the request to the same deadline (its timeout filter): one it
            # cannot apply in time is answered 504 and not applied later.
            query = [*query, ("timeout", f"{max(1, int(left * 1000))}ms")]
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._count(method, 0)
            raise KubeApiError(
                code=0, reason="Unreachable", message=f"{method} {path}: {exc!r}"
            ) from exc
        self._count(method, response.status)
        if response.status >= 300:
            body_bytes = await response.read()
            response.release()
            raise KubeApiError.from_response(
                code=response.status,
                body=body_bytes,
                retry_after=response.headers.get("Retry-After"),
                what=f"{method} {path}",
            )
        return response

    def _count(self, method: str, code: int) -> None:
        if self._metrics is not None:
            self._metrics.api_requests.labels(method, str(code)).inc()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object | None = None,
        content_type: str = "application/json",
    ) -> bytes:
        """One request; the response body, or KubeApiError."""
        response = await self._open(method, path, query=query, body=body, content_type=content_type)
        try:
            return await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeApiError(
                code=0, reason="Unreachable", message=f"{method} {path}: {exc!r}"
            ) from exc
        finally:
            response.release()

    # -- verbs --------------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, *, namespace: str = "") -> bytes:
        return await self.request("GET", resource.path(namespace=namespace, name=name))

    async def get_or_none(
        self, resource: Resource, name: str, *, namespace: str = ""
    ) -> bytes | None:
        try:
            return await self.get(resource, name, namespace=namespace)
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
    ) -> bytes:
        query = _selectors(label_selector, field_selector)
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        return await self.request("GET", resource.path(namespace=namespace), query=query)

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str = "",
        name: str = "",
        subresource: str = "",
    ) -> bytes:
        """POST a new object, or (with ``name`` and ``subresource``) to a subresource that
        creates, such as ``pods/<name>/eviction``."""
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        return await self.request("POST", path, body=body)

    async def replace(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> bytes:
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        return await self.request("PUT", path, body=body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        subresource: str = "",
        patch_type: PatchType = "merge",
        field_manager: str = "",
        force: bool = False,
    ) -> bytes:
        query: list[tuple[str, str]] = []
        if field_manager:
            query.append(("fieldManager", field_manager))
        if force:
            query.append(("force", "true"))
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        return await self.request(
            "PATCH", path, query=query, body=body, content_type=_PATCH_CONTENT_TYPES[patch_type]
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str = "",
        uid: str = "",
        propagation: str = "",
    ) -> bool:
        """Delete; False when it was already gone. ``uid`` guards against deleting a successor."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid:
            options["preconditions"] = {"uid": uid}
        if propagation:
            options["propagationPolicy"] = propagation
        try:
            await self.request(
                "DELETE", resource.path(namespace=namespace, name=name), body=options
            )
        except KubeApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_s: int = 300,
        inactivity_s: float = 330.0,
    ) -> AsyncIterator[bytes]:
        """The lines of one watch stream, with bookmarks, until the server ends it.

        Raises TimeoutError when no line (not even a bookmark) arrives for ``inactivity_s``,
        which catches a stream that died without closing.
        """
        query = _selectors(label_selector, field_selector)
        query += [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_s)),
        ]
        response = await self._open(
            "GET",
            resource.path(namespace=namespace),
            query=query,
            request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout),
        )
        try:
            while True:
                try:
                    async with asyncio.timeout(inactivity_s):
                        line = await response.content.readline()
                except (aiohttp.ClientError, OSError) as exc:
                    raise KubeApiError(
                        code=0, reason="StreamBroken", message=f"watch {resource.plural}: {exc!r}"
                    ) from exc
                if not line:
                    return
                if line.strip():
                    yield line
        finally:
            response.release()


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "ws_proxy", "wss_proxy")


def _skip_env_lookups_when_unused(api: k8s.ApiClient) -> None:
    """Stop the HTTP session looking up proxies and netrc per request when there are none.

    kubernetes-asyncio opens its session with ``trust_env=True``, which costs two thread-pool
    round trips on every request (a netrc lookup and a proxy lookup). With no proxy variables and
    no netrc file those lookups always come back empty, so they are switched off once, here.
    """
    environ = {key.lower() for key, value in os.environ.items() if value}
    netrc = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    if environ.intersection(_PROXY_VARIABLES) or netrc.exists():
        return
    session = getattr(api.rest_client, "pool_manager", None)
    if isinstance(session, aiohttp.ClientSession):
        session._trust_env = False


def _selectors(label_selector: str, field_selector: str) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query
