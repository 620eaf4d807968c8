"""The HTTP face of the emulator: one aiohttp application that routes every request.

Only HTTP concerns live here (paths, verbs, query options, status codes); API semantics are
in ``engine``, ``listing`` and ``watch``; what a request's body and options say is
``requestparts``', the response forms and headers ``responses``', who may do what ``access``'.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiohttp import web
from multidict import MultiDict

from sim.kubeapi.auth import bootstrap, signers
from sim.kubeapi.auth.jwt import Signer
from sim.kubeapi.cluster.controllers import Controllers
from sim.kubeapi.cluster.eviction import evict
from sim.kubeapi.config import ServerConfig
from sim.kubeapi.http import discovery, openapi
from sim.kubeapi.http.access import Access
from sim.kubeapi.http.faults import Faults
from sim.kubeapi.http.requestparts import delete_options, request_body, request_delete_options
from sim.kubeapi.http.responses import content_type, error_response, json_response, representation
from sim.kubeapi.http.routing import ResourcePath, parse
from sim.kubeapi.kinds import register_builtins
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.query import (
    dry_run,
    field_validation,
    list_options,
    parse_bool,
    parse_duration,
)
from sim.kubeapi.reads import tables
from sim.kubeapi.reads.listing import (
    Representation,
    list_objects,
    render_list,
    served_by_webhook,
)
from sim.kubeapi.reads.watch import WatchSettings, serve_watch
from sim.kubeapi.storage.datadir import SERVICE_ACCOUNT_KEY, DataDir
from sim.kubeapi.storage.resources import Registry, ResourceType
from sim.kubeapi.storage.store import Event, Store
from sim.kubeapi.validation import builtin_schemas
from sim.kubeapi.writes import scale
from sim.kubeapi.writes.engine import Engine
from sim.kubeapi.writes.options import CRD_STORAGE, DeleteOptions, Result, WriteOptions

log = logging.getLogger(__name__)

JSON = "application/json"
HEALTH_PATHS = ("/healthz", "/livez", "/readyz")


class ApiServer:
    """Store, registry, engine, controllers and faults behind one aiohttp application."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig()
        self.release = self.config.release()
        self.store = Store(window=self.config.watch_window)
        self.registry = Registry()
        register_builtins(self.registry, self.release)
        self.engine = Engine(
            config=self.config, store=self.store, registry=self.registry, release=self.release
        )
        self.data_dir = DataDir(Path(self.config.data_dir)) if self.config.data_dir else None
        signer = None
        if self.data_dir is not None:
            self._restore(self.data_dir)
            signer = Signer(self.data_dir.kept(SERVICE_ACCOUNT_KEY, lambda: Signer().key_pem))
        self.controllers = Controllers(self.engine)
        self.faults = Faults(drop=self.store.drop_watches)
        self.access = Access(self.config, self.store, signer=signer)
        self._openapi_cache: dict[tuple[int, str, str], bytes] = {}
        self.watch_settings = WatchSettings(
            bookmark_interval=self.config.bookmark_interval_s,
            default_timeout=self.config.default_watch_timeout_s,
            too_large_wait=self.config.too_large_rv_wait_s,
            coalesce=self.config.watch_coalesce_s,
        )

    def _restore(self, data_dir: DataDir) -> None:
        """Come back as the server that kept ``data_dir``: its objects, its resourceVersion,
        its CRDs served; then keep every change there."""
        objects, rv = data_dir.journal.load()
        self.store.restore(objects, rv=rv)
        for entry in self.store.bucket(CRD_STORAGE).entries():
            self.engine.sync_crd(entry.obj())
        data_dir.journal.rewrite(self.store.objects(), rv=self.store.rv)
        self.store.add_listener(self._journal)
        if objects:
            log.info("restored %d objects at resourceVersion %d", len(objects), rv)

    def _journal(self, bucket: str, event: Event) -> None:
        assert self.data_dir is not None
        journal = self.data_dir.journal
        journal.append(bucket, event)
        if journal.needs_compaction(self.store.object_count):
            journal.rewrite(self.store.objects(), rv=self.store.rv)

    async def seed(self) -> None:
        ns_rt = self.registry.get("", "v1", "namespaces")
        assert ns_rt is not None
        for name in self.config.namespaces:
            if self.store.bucket("namespaces").get("", name) is None:
                body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                await self.engine.create(
                    ns_rt,
                    namespace="",
                    body=body,
                    opts=WriteOptions(field_manager="kube-apiserver"),
                )
        if self.config.enforce_auth:
            await self._seed_rbac()

    async def _seed_rbac(self) -> None:
        """The bootstrap ClusterRoles and bindings, as kube-apiserver's RBAC post-start hook."""
        seeds = (
            ("clusterroles", bootstrap.cluster_roles()),
            ("clusterrolebindings", bootstrap.cluster_role_bindings()),
        )
        for plural, objects in seeds:
            rt = self.registry.get("rbac.authorization.k8s.io", "v1", plural)
            assert rt is not None
            for body in objects:
                if self.store.bucket(rt.storage).get("", body["metadata"]["name"]) is None:
                    await self.engine.create(
                        rt,
                        namespace="",
                        body=body,
                        opts=WriteOptions(field_manager="kube-apiserver"),
                    )

    def app(self) -> web.Application:
        application = web.Application(client_max_size=64 * 1024 * 1024)
        application.router.add_route("*", "/{tail:.*}", self.handle)
        return application

    # -- dispatch -------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._handle(request)
        except errors.ApiError as err:
            return error_response(err)
        except asyncio.CancelledError:
            raise
        except ConnectionResetError:
            # The client went away while sending (a killed controller, say): its body never
            # fully arrived, nothing was written, and nobody is left to answer.
            log.info("client gone before %s %s was read", request.method, request.path_qs)
            return web.Response(status=499, text="client closed request")
        except Exception as exc:
            # Never swallow the cause: the traceback goes to the log (exc_info) and the
            # exception's type and text into the log line and the 500 Status.
            log.error(
                "unexpected failure serving %s %s: %r",
                request.method,
                request.path_qs,
                exc,
                exc_info=exc,
            )
            return error_response(errors.internal_error(repr(exc)))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        user = self.access.authenticate(request)
        info = parse(path)
        if info is None or info.is_discovery:
            self.access.check_path(user, request.method, path)
        else:
            verb = _verb(request.method, info.name, _is_watch(request, info))
            self.access.check_resource(user, info, verb)
        if path in HEALTH_PATHS or path.startswith(tuple(p + "/" for p in HEALTH_PATHS)):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/version" or path == "/version/":
            return json_response(discovery.version_info(self.release))
        if path.rstrip("/") == "/api":
            return json_response(discovery.api_versions(request.host))
        if path.rstrip("/") == "/apis":
            return json_response(discovery.api_group_list(self.registry))
        if path.startswith("/openapi/"):
            return self._openapi(path)
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "apis":
            group = discovery.api_group(self.registry, parts[1])
            if group is None:
                raise errors.path_not_found()
            return json_response(group)
        if info is None:
            raise errors.path_not_found()
        if info.is_discovery:
            doc = discovery.resource_list(self.registry, info.group, info.version)
            if doc is None:
                raise errors.path_not_found()
            return json_response(doc)
        return await self._resource(request, info)

    def _openapi(self, path: str) -> web.Response:
        if path.rstrip("/") == "/openapi/v3":
            return json_response(openapi.index(self.registry))
        if path.startswith("/openapi/v3/"):
            rest = [p for p in path[len("/openapi/v3/") :].split("/") if p]
            group, version = (
                ("", rest[1])
                if rest[:1] == ["api"] and len(rest) == 2
                else ((rest[1], rest[2]) if rest[:1] == ["apis"] and len(rest) == 3 else ("", ""))
            )
            if version:
                key = (self.registry.generation, group, version)
                cached = self._openapi_cache.get(key)
                if cached is None:
                    doc = openapi.gv_document(
                        self.registry,
                        group,
                        version,
                        schemas=builtin_schemas.load(self.release.minor),
                        server_version=discovery.version_info(self.release)["gitVersion"],
                    )
                    if doc is not None:
                        cached = codec.encode(doc)
                        self._openapi_cache = {key: cached}
                if cached is not None:
                    return json_response(cached)
        raise errors.path_not_found()

    # -- resources ------------------------------------------------------------------------------

    async def _resource(self, request: web.Request, info: ResourcePath) -> web.StreamResponse:
        rt = self.registry.get(info.group, info.version, info.resource)
        if rt is None:
            raise errors.path_not_found()
        if info.namespace is not None and not rt.namespaced:
            raise errors.path_not_found()
        if info.subresource and info.subresource not in rt.subresources:
            raise errors.path_not_found()
        method = request.method
        name = info.name
        namespace = info.namespace if rt.namespaced else None
        if rt.namespaced and name is not None and namespace is None:
            raise errors.path_not_found()
        query = request.query
        is_watch = _is_watch(request, info)
        verb = _verb(method, name, is_watch)
        delay = self.faults.latency(verb, rt.plural)
        # A write's ``timeout`` bounds it until it is applied, as the real server's timeout
        # filter does: one that cannot be applied within it is answered 504 and never applied.
        limit = parse_duration(query, "timeout") if method != "GET" else None
        if delay > 0:
            if limit is not None and delay >= limit:
                await asyncio.sleep(limit)
                raise errors.timeout(
                    "request did not complete within requested timeout - context deadline exceeded"
                )
            await asyncio.sleep(delay)
        failure = self.faults.take_failure(verb, rt.plural, rt.group, name or "")
        if failure is not None:
            raise failure
        if verb not in rt.verbs and not info.subresource:
            raise errors.method_not_allowed(rt.plural, rt.group, verb)
        rep = representation(request.headers.get("Accept", ""))
        if rep is None:
            raise errors.not_acceptable([JSON, "application/yaml"])
        if rep.kind == "table":
            include = query.get("includeObject") or "Metadata"
            if include not in ("None", "Metadata", "Object"):
                raise errors.bad_request(f"includeObject: unsupported value {include!r}")
            rep = replace(rep, include_object=include)
        if info.subresource == scale.SCALE:
            return await self._scale(request, rt, namespace or "", name)
        if method == "GET":
            if name is None:
                return await self._list(request, rt, namespace, rep, watch=is_watch)
            obj = await self.engine.read(rt, namespace or "", name)
            return self._object_response(rt, obj, rep)
        opts = self._write_options(request)
        if method == "POST" and self.access.serves(info):
            answer = self.access.answer(request, info, await request_body(request))
            return json_response(answer, status=201)
        if method == "POST":
            if info.subresource == "eviction":
                if name is None:
                    raise errors.path_not_found()
                body = await request_body(request)
                requested = body.get("deleteOptions") if isinstance(body, dict) else None
                result = await evict(
                    self.engine,
                    rt,
                    namespace=namespace or "",
                    name=name,
                    body=body,
                    options=delete_options(
                        requested if isinstance(requested, dict) else {}, MultiDict()
                    ),
                    opts=opts,
                )
                return json_response(result.body, status=result.code)
            if info.subresource == "binding":
                if name is None:
                    raise errors.path_not_found()
                result = await self.engine.bind(
                    rt,
                    namespace=namespace or "",
                    name=name,
                    body=await request_body(request),
                    opts=opts,
                )
                return json_response(result.body, status=result.code)
            if name is not None or info.subresource:
                raise errors.method_not_allowed(rt.plural, rt.group, "create")
            body = await request_body(request)
            result = await self.engine.create(rt, namespace=namespace or "", body=body, opts=opts)
            return self._result(rt, result, rep)
        if method in ("PUT", "PATCH") and name is not None:
            await self._check_signer(request, rt, info.subresource, name)
        if method == "PUT":
            if name is None:
                raise errors.method_not_allowed(rt.plural, rt.group, "update")
            if info.subresource in ("binding", "eviction"):
                raise errors.method_not_allowed(rt.plural, rt.group, "update")
            body = await request_body(request)
            result = await self.engine.update(
                rt,
                namespace=namespace or "",
                name=name,
                body=body,
                opts=opts,
                subresource=info.subresource,
            )
            return self._result(rt, result, rep)
        if method == "PATCH":
            if name is None or info.subresource in ("binding", "eviction", "finalize"):
                raise errors.method_not_allowed(rt.plural, rt.group, "patch")
            content_type = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            force = parse_bool(query, "force")
            raw = await request.read()
            result = await self.engine.patch(
                rt,
                namespace=namespace or "",
                name=name,
                content_type=content_type,
                raw=raw,
                opts=opts,
                subresource=info.subresource,
                force=force,
            )
            return self._result(rt, result, rep)
        if method == "DELETE":
            if info.subresource:
                raise errors.method_not_allowed(rt.plural, rt.group, "delete")
            options = await request_delete_options(request)
            if options.dry_run:
                opts = replace(opts, dry_run=True)
            if name is None:
                return await self._delete_collection(request, rt, namespace, options, opts)
            result = await self.engine.delete(
                rt, namespace=namespace or "", name=name, options=options, opts=opts
            )
            return self._result(rt, result, rep)
        raise errors.method_not_allowed(rt.plural, rt.group, method.lower())

    async def _check_signer(
        self, request: web.Request, rt: ResourceType, subresource: str, name: str
    ) -> None:
        """A CSR's approval and status writes need the signer's permission as well."""
        verb = signers.signer_verb(rt.group, rt.plural, subresource)
        if verb is None:
            return
        current = await self.engine.read(rt, "", name)
        signer_name = str((current.get("spec") or {}).get("signerName") or "")
        self.access.check_signer(request, verb=verb, csr_name=name, signer_name=signer_name)

    async def _scale(
        self, request: web.Request, rt: ResourceType, namespace: str, name: str | None
    ) -> web.Response:
        """GET, PUT and PATCH of ``.../<name>/scale`` (``writes/scale.py``)."""
        if name is None:
            raise errors.path_not_found()
        if request.method == "GET":
            return json_response(await scale.read(self.engine, rt, namespace, name))
        opts = self._write_options(request)
        if request.method == "PUT":
            body = await request_body(request)
            return json_response(
                await scale.update(
                    self.engine, rt, namespace=namespace, name=name, body=body, opts=opts
                )
            )
        if request.method == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            answer = await scale.patch(
                self.engine,
                rt,
                namespace=namespace,
                name=name,
                content_type=content_type,
                raw=await request.read(),
                opts=opts,
            )
            return json_response(answer)
        verb = "create" if request.method == "POST" else request.method.lower()
        raise errors.method_not_allowed(rt.plural, rt.group, verb)

    def _object_response(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        rep: Representation,
        *,
        status: int = 200,
        warnings: list[str] | None = None,
    ) -> web.Response:
        if rep.kind == "table":
            body = tables.table(
                rt,
                [obj],
                include_object=rep.include_object,
                list_meta={"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")},
            )
            body["apiVersion"] = f"meta.k8s.io/{rep.table_version}"
            return json_response(
                body, status=status, warnings=warnings, content_type=content_type(rep)
            )
        if rep.kind == "metadata":
            return json_response(tables.partial_metadata(obj), status=status, warnings=warnings)
        return json_response(obj, status=status, warnings=warnings)

    def _result(self, rt: ResourceType, result: Result, rep: Representation) -> web.Response:
        if result.body.get("kind") == "Status":
            return json_response(result.body, status=result.code, warnings=result.warnings)
        return self._object_response(
            rt, result.body, rep, status=result.code, warnings=result.warnings
        )

    async def _list(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str | None,
        rep: Representation,
        *,
        watch: bool,
    ) -> web.StreamResponse:
        opts = list_options(request.query, supported_fields=rt.selectable_fields(), watch=watch)
        if opts.watch:
            return await serve_watch(
                request,
                store=self.store,
                rt=rt,
                namespace=namespace,
                opts=opts,
                rep=rep,
                content_type=content_type(rep),
                settings=self.watch_settings,
                force_expired=self.faults.take_expired_watch(rt.plural),
                conversion=self.engine.conversion,
            )
        body = await list_objects(
            self.store,
            rt,
            namespace,
            opts,
            rep,
            too_large_wait=self.config.too_large_rv_wait_s,
            conversion=self.engine.conversion,
        )
        return json_response(body, content_type=content_type(rep))

    async def _delete_collection(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str | None,
        options: DeleteOptions,
        opts: WriteOptions,
    ) -> web.Response:
        list_opts = list_options(
            request.query, supported_fields=rt.selectable_fields(), watch=False
        )
        bucket = self.store.bucket(rt.storage)
        targets = list(bucket.select(namespace, list_opts.labels, list_opts.fields))
        deleted = []
        for entry in targets:
            try:
                await self.engine.delete(
                    rt, namespace=entry.namespace, name=entry.name, options=options, opts=opts
                )
            except errors.ApiError as err:
                if err.code == 404:
                    continue
                raise
            deleted.append(entry)
        served = await served_by_webhook(self.engine.conversion, rt, deleted)
        body = render_list(
            rt, deleted, {"resourceVersion": str(self.store.rv)}, Representation(), served=served
        )
        return json_response(body)

    # -- request parts --------------------------------------------------------------------------

    def _write_options(self, request: web.Request) -> WriteOptions:
        query = request.query
        return WriteOptions(
            dry_run=dry_run(query.getall("dryRun", [])),
            field_manager=query.get("fieldManager", ""),
            field_validation=field_validation(query),
            user_agent=request.headers.get("User-Agent", ""),
            user=self.access.webhook_user(request),
        )


def _is_watch(request: web.Request, info: ResourcePath) -> bool:
    return info.legacy_watch or (
        request.method == "GET" and info.name is None and parse_bool(request.query, "watch")
    )


def _verb(method: str, name: str | None, watch: bool) -> str:
    if method == "GET":
        if name is not None:
            return "get"
        return "watch" if watch else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if name is not None else "deletecollection"
    return method.lower()
