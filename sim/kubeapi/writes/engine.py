"""The write path: create and update (patch and delete build on it), with the real server's
rules.

Order of one write, as on the real server: decode and prune the body (unknown fields are
reported per ``fieldValidation``), run mutating webhooks, default, apply the kind's
create/update preparation (system metadata, status/spec separation, generation), validate, run
validating admission (ValidatingAdmissionPolicies, then validating webhooks), convert to the
stored version, then commit under the next resourceVersion unless nothing changed. Between
webhook calls other writes may land; the commit re-checks the object and retries (or answers
409 when the client sent a resourceVersion).

Which form the rules see: a built-in kind's strategy is written for its stored version, so its
object is converted first (in process); a custom resource's rules are those of the request's
version (its schema, defaults and CEL rules), so it stays in that version until it is encoded
for storage, through the CRD's conversion webhook where it has one (``sim.kubeapi.conversion``).
The answer is the stored object decoded into the request's version again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.kubeapi.admission import plugins
from sim.kubeapi.admission.auditlog import AuditLog
from sim.kubeapi.admission.webhooks import ADMIN_USER, AdmissionRequest, Dispatcher
from sim.kubeapi.config import ServerConfig
from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.kinds import apiextensions
from sim.kubeapi.machinery import codec, errors, meta
from sim.kubeapi.releases import Release
from sim.kubeapi.releases import fields as release_fields
from sim.kubeapi.storage.resources import Obj, Registry, ResourceType, version_priority
from sim.kubeapi.storage.store import Entry, Store
from sim.kubeapi.webhookclient.client import WebhookClient
from sim.kubeapi.writes.deletion import Deleter
from sim.kubeapi.writes.managedfields import read_entries, record_update
from sim.kubeapi.writes.options import (
    CRD_STORAGE,
    MAX_RETRIES,
    ConcurrentChangeError,
    DeleteOptions,
    Result,
    WriteOptions,
)
from sim.kubeapi.writes.patcher import Patcher


class Engine:
    """All API semantics that do not depend on HTTP."""

    def __init__(
        self,
        *,
        config: ServerConfig,
        store: Store,
        registry: Registry,
        release: Release | None = None,
    ) -> None:
        self.config = config
        self.release = release or config.release()
        """What the emulated release drops on write and validates differently."""
        self.store = store
        self.registry = registry
        self.webhooks = WebhookClient(dict(config.webhook_service_hosts))
        self.conversion = Converter(client=self.webhooks, registry=registry)
        self.admission = Dispatcher(
            store=store,
            registry=registry,
            client=self.webhooks,
            conversion=self.conversion,
            namespace_labels=self._namespace_labels,
            on_audit=AuditLog(Path(config.audit_log)).write if config.audit_log else None,
        )
        self._fields_cache: dict[str, tuple[int, Callable[[Obj], dict[str, str]]]] = {}
        self.patcher = Patcher(self)
        self.deleter = Deleter(self)

    # -- helpers --------------------------------------------------------------------------------

    def _namespace_labels(self, name: str) -> dict[str, str] | None:
        entry = self.store.bucket("namespaces").get("", name)
        return dict(entry.labels) if entry is not None else None

    def fields_fn(self, storage: str) -> Callable[[Obj], dict[str, str]]:
        cached = self._fields_cache.get(storage)
        if cached is not None and cached[0] == self.registry.generation:
            return cached[1]
        rt = self.registry.storage_type(storage)
        getters = dict(rt.strategy.field_getters) if rt is not None else {}
        namespaced = rt.namespaced if rt is not None else True

        def fields(obj: Obj) -> dict[str, str]:
            m = obj.get("metadata") or {}
            out = {"metadata.name": m.get("name", "")}
            if namespaced:
                out["metadata.namespace"] = m.get("namespace", "")
            for name, getter in getters.items():
                try:
                    out[name] = getter(obj)
                except (KeyError, TypeError, AttributeError, IndexError):
                    out[name] = ""
            return out

        self._fields_cache[storage] = (self.registry.generation, fields)
        return fields

    def current(self, rt: ResourceType, namespace: str, name: str) -> Entry:
        entry = self.store.bucket(rt.storage).get(namespace if rt.namespaced else "", name)
        if entry is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return entry

    async def read(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        return await self.conversion.served(rt, self.current(rt, namespace, name).obj())

    def working_form(self, rt: ResourceType, obj: Obj) -> Obj:
        """``obj`` (request version) in the form the kind's rules apply to: a built-in kind's
        stored version, a custom resource's own version (see the module docstring)."""
        return obj if rt.custom else rt.to_storage(obj)

    async def storage_form(self, rt: ResourceType, work: Obj) -> Obj:
        """A working-form object as it is stored (only a custom resource changes here)."""
        return await self.conversion.stored(rt, work) if rt.custom else work

    def admission_form(self, rt: ResourceType, work: Obj) -> Obj:
        """A copy of a working-form object in the request's version, for admission."""
        return codec.copy(work) if rt.custom else rt.from_storage(codec.copy(work))

    def decode(
        self,
        rt: ResourceType,
        body: Any,
        opts: WriteOptions,
        warnings: list[str],
        *,
        schema_checked: bool = False,
    ) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml"
            )
        api_version = body.get("apiVersion")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"the kind in the data does not match the expected kind"
            )
        obj: Obj = body  # the caller hands over a fresh object
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        if not schema_checked:
            self.check_schema(rt, obj, opts, warnings, patch=False)
        return obj

    def check_schema(
        self, rt: ResourceType, obj: Obj, opts: WriteOptions, warnings: list[str], *, patch: bool
    ) -> None:
        """Decoding rules: wrong JSON types are a 400 (built-in kinds), unknown fields are
        dropped and reported per fieldValidation."""
        if rt.schema is None:
            return
        if rt.schema.mode == "builtin":
            bad = rt.schema.type_errors(obj)
            if bad:
                path, expected, value = bad[0]
                raise errors.bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                    f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                    f"{rt.kind}.{path} of type {expected}"
                )
        unknown = rt.schema.prune(obj, patch=patch)
        if unknown:
            self.unknown_fields(unknown, opts, warnings)

    @staticmethod
    def unknown_fields(unknown: list[str], opts: WriteOptions, warnings: list[str]) -> None:
        mode = opts.field_validation or "Warn"
        if mode == "Strict":
            raise errors.bad_request(
                "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown)
            )
        if mode == "Warn":
            warnings.extend(f'unknown field "{p}"' for p in unknown)

    def _check_namespace(
        self, rt: ResourceType, namespace: str, name: str, *, creating: bool
    ) -> None:
        if not rt.namespaced:
            return
        entry = self.store.bucket("namespaces").get("", namespace)
        if entry is None:
            raise errors.not_found("namespaces", "", namespace)
        if creating and entry.deleting:
            why = (
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated"
            )
            raise errors.forbidden_error(
                rt.plural,
                rt.group,
                name,
                why,
                causes=[
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            )

    def _check_crd_active(self, rt: ResourceType) -> None:
        if not rt.custom:
            return
        crd = self.store.bucket(CRD_STORAGE).get("", rt.crd_name)
        if crd is not None and crd.deleting:
            raise errors.ApiError(
                code=405,
                reason="MethodNotAllowed",
                message="create not allowed while custom resource definition is terminating",
                details={"group": rt.group, "kind": rt.plural},
            )

    def _validate(self, rt: ResourceType, obj: Obj, errs: list[errors.FieldError]) -> None:
        if errs:
            raise errors.invalid_object(rt.kind, rt.group, meta.meta(obj).get("name", ""), errs)

    def _set_namespace(self, rt: ResourceType, obj: Obj, namespace: str) -> None:
        m = meta.meta(obj)
        if rt.namespaced:
            given = m.get("namespace")
            if given and given != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            m["namespace"] = namespace
        else:
            m.pop("namespace", None)

    def _builtin_admission(self, rt: ResourceType, obj: Obj) -> None:
        """The built-in mutating plugins (creates and updates of the object itself); they
        run before the mutating webhooks, as on the real server."""
        seconds = self.config.default_toleration_seconds
        if rt.storage == "pods" and seconds is not None:
            plugins.default_toleration_seconds(obj, seconds)

    def admission_request(
        self,
        rt: ResourceType,
        operation: str,
        namespace: str,
        name: str,
        obj: Obj | None,
        old: Obj | None,
        subresource: str,
        opts: WriteOptions,
        options: Obj | None,
    ) -> AdmissionRequest:
        return AdmissionRequest(
            rt=rt,
            operation=operation,
            namespace=namespace if rt.namespaced else "",
            name=name,
            obj=obj,
            old=old,
            subresource=subresource,
            dry_run=opts.dry_run,
            options=options,
            user=dict(opts.user or ADMIN_USER),
        )

    # -- create ---------------------------------------------------------------------------------

    async def create(
        self, rt: ResourceType, *, namespace: str, body: Any, opts: WriteOptions
    ) -> Result:
        warnings: list[str] = []
        obj = self.decode(rt, body, opts, warnings)
        return await self.create_decoded(rt, namespace, obj, opts, warnings, managed=None)

    async def create_decoded(
        self,
        rt: ResourceType,
        namespace: str,
        obj: Obj,
        opts: WriteOptions,
        warnings: list[str],
        *,
        managed: str | None,
    ) -> Result:
        """Create ``obj`` (request version, decoded). ``managed="apply"`` keeps SSA's fields."""
        strategy = rt.strategy
        self._set_namespace(rt, obj, namespace)
        m = meta.meta(obj)
        name = m.get("name") or ""
        self._check_namespace(rt, namespace, name, creating=True)
        self._check_crd_active(rt)
        strategy.canonical(obj)
        self._builtin_admission(rt, obj)
        req = self.admission_request(
            rt,
            "CREATE",
            namespace,
            name,
            obj,
            None,
            "",
            opts,
            {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        )
        if self.admission.has_webhooks():
            mutated = await self.admission.mutate(req)
            obj = mutated if mutated is not None else obj
            self._set_namespace(rt, obj, namespace)
        stored = self.working_form(rt, obj)
        strategy.default(stored)
        m = meta.meta(stored)
        if not m.get("name") and m.get("generateName"):
            m["name"] = meta.generate_name(m["generateName"])
        meta.fill_system_fields(stored, has_generation=strategy.has_generation)
        if strategy.status_subresource:
            status = strategy.initial_status(stored)
            if status is None:
                stored.pop("status", None)
            else:
                stored["status"] = status
        strategy.prepare_create(stored)
        strategy.stamp_requester(stored, dict(opts.user or ADMIN_USER))
        release_fields.drop_disabled_fields(rt.storage, stored, None, self.release)
        errs = meta.validate_object_meta(
            stored, namespaced=rt.namespaced, name_rule=strategy.name_rule, creating=True
        )
        if not errs:
            errs = strategy.validate(stored)
            errs += release_fields.release_errors(rt.storage, stored, self.release)
        self._validate(rt, stored, errs)
        if managed != "apply":
            entries = read_entries(stored) if "managedFields" in m else []
            record_update(
                old=None,
                new=stored,
                entries=entries,
                manager=opts.manager,
                api_version=rt.api_version,
                subresource="",
                shape=rt.shape,
            )
        name = m["name"]
        if self.admission.validating():
            req.obj = self.admission_form(rt, stored)
            req.name = name
            await self.admission.validate(req)
        warnings.extend(req.warnings)
        stored = await self.storage_form(rt, stored)
        bucket = self.store.bucket(rt.storage)
        if bucket.get(namespace if rt.namespaced else "", name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        if opts.dry_run:
            return Result(await self.conversion.served(rt, stored), 201, warnings)
        self.store.put(
            rt.storage, stored, prev=None, fields=self.fields_fn(rt.storage), typed=not rt.custom
        )
        await self._after_commit(rt.storage, stored, created=True)
        return Result(await self.conversion.served(rt, codec.copy(stored)), 201, warnings)

    # -- update ---------------------------------------------------------------------------------

    async def update(
        self,
        rt: ResourceType,
        *,
        namespace: str,
        name: str,
        body: Any,
        opts: WriteOptions,
        subresource: str = "",
    ) -> Result:
        warnings: list[str] = []
        obj = self.decode(rt, body, opts, warnings)
        m = meta.meta(obj)
        if m.get("name") and m["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({m['name']}) does not match the name on the URL ({name})"
            )
        m["name"] = name
        self._set_namespace(rt, obj, namespace)
        ns = namespace if rt.namespaced else ""
        for _ in range(MAX_RETRIES):
            cur = self.store.bucket(rt.storage).get(ns, name)
            if cur is None:
                if not subresource and rt.strategy.allow_create_on_update:
                    return await self.create_decoded(
                        rt, namespace, codec.copy(obj), opts, warnings, managed=None
                    )
                raise errors.not_found(rt.plural, rt.group, name)
            given_rv = m.get("resourceVersion")
            if given_rv:
                if given_rv != str(cur.rv):
                    raise errors.conflict(rt.plural, rt.group, name)
            elif not rt.strategy.allow_unconditional_update:
                raise errors.invalid_object(
                    rt.kind,
                    rt.group,
                    name,
                    [
                        errors.invalid(
                            "metadata.resourceVersion", 0, "must be specified for an update"
                        )
                    ],
                )
            if m.get("uid") and m["uid"] != cur.uid:
                raise errors.conflict(
                    rt.plural,
                    rt.group,
                    name,
                    f"Precondition failed: UID in precondition: {m['uid']}, UID in object "
                    f"meta: {cur.uid}",
                )
            try:
                return await self.update_from(
                    rt, cur, codec.copy(obj), opts, warnings, subresource=subresource, managed=None
                )
            except ConcurrentChangeError:
                if given_rv:
                    raise errors.conflict(rt.plural, rt.group, name) from None
        raise errors.conflict(rt.plural, rt.group, name)

    async def update_from(
        self,
        rt: ResourceType,
        cur: Entry,
        new_version_form: Obj,
        opts: WriteOptions,
        warnings: list[str],
        *,
        subresource: str,
        managed: str | None,
    ) -> Result:
        """Turn a client's new object into the stored next version of ``cur`` and commit it."""
        strategy = rt.strategy
        stored_old = cur.obj()
        # A second decode of the stored bytes is a cheaper private copy than copying ``old``.
        old_version_form = await self.conversion.served(rt, cur.obj())
        old = codec.copy(old_version_form) if rt.custom else stored_old
        strategy.canonical(new_version_form)
        if not subresource:
            self._builtin_admission(rt, new_version_form)
        req = self.admission_request(
            rt,
            "UPDATE",
            cur.namespace,
            cur.name,
            new_version_form,
            old_version_form,
            subresource,
            opts,
            {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
        )
        if self.admission.has_webhooks():
            mutated = await self.admission.mutate(req)
            if mutated is not None:
                new_version_form = mutated
        incoming = self.working_form(rt, new_version_form)
        incoming_meta = meta.meta(incoming)
        if subresource in ("status", "finalize", "approval"):
            # A built-in kind's stored bytes decode into a fresh copy faster than a deep copy.
            new = codec.copy(old) if rt.custom else cur.obj()
            if subresource in ("status", "approval"):
                if "status" in incoming:
                    new["status"] = incoming["status"]
                else:
                    new.pop("status", None)
                release_fields.drop_disabled_status_fields(rt.storage, new, old, self.release)
                strategy.prepare_subresource_update(subresource, new, old)
            else:
                # namespaces/finalize changes nothing but spec.finalizers.
                new.setdefault("spec", {})["finalizers"] = (incoming.get("spec") or {}).get(
                    "finalizers"
                ) or []
            if "managedFields" in incoming_meta:
                meta.meta(new)["managedFields"] = incoming_meta["managedFields"]
        else:
            new = incoming
            meta.keep_system_fields(new, old)
            if "managedFields" not in incoming_meta and "managedFields" in meta.meta(old):
                meta.meta(new)["managedFields"] = meta.meta(old)["managedFields"]
            if strategy.status_subresource:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            strategy.default(new)
            strategy.prepare_update(new, old)
            release_fields.drop_disabled_fields(rt.storage, new, old, self.release)
        errs = meta.validate_finalizer_update(new, old)
        if subresource in ("status", "approval"):
            errs += strategy.validate_subresource_update(subresource, new, old)
        elif not subresource:
            # Metadata that did not change was valid when it was stored.
            if not meta.same_metadata(new, old):
                errs += meta.validate_object_meta(
                    new, namespaced=rt.namespaced, name_rule=strategy.name_rule, creating=False
                )
            if not errs:
                errs += strategy.validate_update(new, old)
                errs += release_fields.release_errors(rt.storage, new, self.release)
        self._validate(rt, new, errs)
        if strategy.has_generation and not subresource and not meta.spec_equal(new, old):
            meta.meta(new)["generation"] = int(meta.meta(old).get("generation", 0)) + 1
        if managed != "apply":
            record_update(
                old=old,
                new=new,
                entries=read_entries(new),
                manager=opts.manager,
                api_version=rt.api_version,
                subresource=subresource if subresource == "status" else "",
                shape=rt.shape,
            )
        # Validating admission sees no-op updates too: the real server runs it before it
        # finds that nothing changed.
        if self.admission.validating():
            req.obj = self.admission_form(rt, new)
            await self.admission.validate(req)
        warnings.extend(req.warnings)
        # Nothing changed when the bytes to store are the stored ones (an object kept in an
        # older stored version is written again, in the current one).
        new = await self.storage_form(rt, new)
        if _same(new, stored_old):
            return Result(old_version_form, 200, warnings)
        if self.store.bucket(rt.storage).get(cur.namespace, cur.name) is not cur:
            raise ConcurrentChangeError()
        if opts.dry_run:
            return Result(await self.conversion.served(rt, new), 200, warnings)
        result, removed = self._commit_update(rt.storage, new, cur)
        if removed:
            self.after_remove(rt.storage, result)
        else:
            await self._after_commit(rt.storage, new, created=False)
        return Result(await self.conversion.served(rt, result), 200, warnings)

    def _commit_update(self, storage: str, new: Obj, cur: Entry) -> tuple[Obj, bool]:
        """Commit; an object being deleted whose last finalizer went is removed at once."""
        fields = self.fields_fn(storage)
        entry = self.store.put(storage, new, prev=cur, fields=fields, typed=bool(cur.type_meta))
        m = meta.meta(new)
        if m.get("deletionTimestamp") and not m.get("finalizers") and self._finalized(storage, new):
            final = self.store.remove(storage, entry, fields=fields)
            return final.obj(), True
        return new, False

    @staticmethod
    def _finalized(storage: str, obj: Obj) -> bool:
        if storage == "namespaces":
            return not (obj.get("spec") or {}).get("finalizers")
        return True

    # -- patch and delete (their own modules) ---------------------------------------------------

    async def patch(
        self,
        rt: ResourceType,
        *,
        namespace: str,
        name: str,
        content_type: str,
        raw: bytes,
        opts: WriteOptions,
        subresource: str = "",
        force: bool = False,
    ) -> Result:
        return await self.patcher.patch(
            rt,
            namespace=namespace,
            name=name,
            content_type=content_type,
            raw=raw,
            opts=opts,
            subresource=subresource,
            force=force,
        )

    async def delete(
        self,
        rt: ResourceType,
        *,
        namespace: str,
        name: str,
        options: DeleteOptions,
        opts: WriteOptions,
    ) -> Result:
        return await self.deleter.delete(
            rt, namespace=namespace, name=name, options=options, opts=opts
        )

    # -- pods/binding ---------------------------------------------------------------------------

    async def bind(
        self, rt: ResourceType, *, namespace: str, name: str, body: Any, opts: WriteOptions
    ) -> Result:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        target = body.get("target") or {}
        if not target.get("name"):
            raise errors.invalid_object("Binding", "", name, [errors.required("target.name")])
        for _ in range(MAX_RETRIES):
            cur = self.current(rt, namespace, name)
            pod = cur.obj()
            spec = pod.setdefault("spec", {})
            why = None
            if cur.deleting:
                why = f"pod {name} is being deleted, cannot be assigned to a host"
            elif spec.get("nodeName"):
                why = f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            elif spec.get("schedulingGates"):
                why = f"pod {name} has non-empty .spec.schedulingGates"
            if why is not None:
                raise errors.conflict("pods/binding", "", name, why)
            spec["nodeName"] = target["name"]
            status = pod.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": codec.format_time(codec.now()),
                }
            )
            status["conditions"] = conditions
            if opts.dry_run:
                return Result(errors.success_status(code=201), 201)
            if self.store.bucket(rt.storage).get(cur.namespace, name) is not cur:
                continue
            self.store.put(rt.storage, pod, prev=cur, fields=self.fields_fn(rt.storage), typed=True)
            return Result(errors.success_status(code=201), 201)
        raise errors.conflict("pods/binding", "", name)

    # -- post-commit hooks ----------------------------------------------------------------------

    async def _after_commit(self, storage: str, obj: Obj, *, created: bool) -> None:
        if storage == CRD_STORAGE:
            self.sync_crd(obj)
        if storage == "namespaces" and created and self.config.create_default_service_accounts:
            sa = self.registry.get("", "v1", "serviceaccounts")
            name = meta.meta(obj)["name"]
            if sa is not None and self.store.bucket(sa.storage).get(name, "default") is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default"},
                }
                with contextlib.suppress(errors.ApiError):
                    await self.create(
                        sa,
                        namespace=name,
                        body=body,
                        opts=WriteOptions(field_manager="kube-controller-manager"),
                    )

    def after_remove(self, storage: str, obj: Obj) -> None:
        if storage == CRD_STORAGE:
            self.unregister_crd(obj)

    def sync_crd(self, crd: Obj) -> None:
        """Serve a CRD's versions now (called for every committed CRD change)."""
        name = meta.meta(crd)["name"]
        for rt in list(self.registry.all()):
            if rt.custom and rt.crd_name == name:
                self.registry.remove(rt.group, rt.version, rt.plural)
        types = apiextensions.resource_types(crd)
        for rt in types:
            self.registry.add(rt, preferred=False)
        if types:
            self._refresh_preferred(types[0].group)

    def unregister_crd(self, crd: Obj) -> None:
        name = meta.meta(crd)["name"]
        storage = ""
        for rt in list(self.registry.all()):
            if rt.custom and rt.crd_name == name:
                storage = rt.storage
                self.registry.remove(rt.group, rt.version, rt.plural)
        if storage:
            self.store.drop_watches(storage)
            self._refresh_preferred(storage.split("/", 1)[0])

    def _refresh_preferred(self, group: str) -> None:
        versions = {rt.version for rt in self.registry.all() if rt.group == group}
        if versions:
            self.registry.set_preferred(group, min(versions, key=version_priority))


def _same(new: Obj, old: Obj) -> bool:
    """Equal apart from resourceVersion and managedFields: a no-op write."""
    nm, om = new.get("metadata") or {}, old.get("metadata") or {}
    if {k: v for k, v in nm.items() if k not in ("resourceVersion", "managedFields")} != {
        k: v for k, v in om.items() if k not in ("resourceVersion", "managedFields")
    }:
        return False
    keys = (set(new) | set(old)) - {"metadata"}
    return all(new.get(k) == old.get(k) for k in keys)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"
