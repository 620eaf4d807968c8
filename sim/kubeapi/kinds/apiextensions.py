"""CustomResourceDefinitions and the custom resources they define.

A CRD is checked (names, scope, versions, structural schema, CEL rules compile), given the
status a real cluster's controllers write at once (NamesAccepted, Established, accepted
names, stored versions), and turned into one ``ResourceType`` per served version. Custom
resources are pruned, defaulted and validated against their version's schema.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from sim.kubeapi.kinds.common import ensure, get
from sim.kubeapi.machinery import codec, errors, jsonpath, names
from sim.kubeapi.machinery.errors import FieldError, FieldErrorType
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import (
    Column,
    Obj,
    ResourceType,
    ScalePaths,
    Strategy,
    WebhookConversion,
    version_priority,
)
from sim.kubeapi.validation import cel
from sim.kubeapi.validation.schema import Schema

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
RULES_SKIPPED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)
BLOCKING = frozenset(
    {
        FieldErrorType.NOT_SUPPORTED,
        FieldErrorType.REQUIRED,
        FieldErrorType.TOO_LONG,
        FieldErrorType.TOO_MANY,
        FieldErrorType.TYPE_INVALID,
    }
)
SCOPES = ("Cluster", "Namespaced")
CONVERSION_STRATEGIES = ("None", "Webhook")
REVIEW_VERSIONS = ("v1", "v1beta1")
"""ConversionReview versions the server speaks; a Webhook CRD must accept one of them."""
NOT_WEBHOOK = "should not be set when strategy is not set to Webhook"
TYPES = ("array", "boolean", "integer", "number", "object", "string")


def storage_version(crd: Obj) -> str:
    for version in get(crd, "spec", "versions") or ():
        if version.get("storage"):
            return str(version["name"])
    return ""


def _condition(type_: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "lastTransitionTime": codec.format_time(codec.now()),
        "reason": reason,
        "message": message,
    }


class CRDStrategy(Strategy):
    status_subresource = True
    has_generation = True
    allow_unconditional_update = False

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        names_ = ensure(spec, "names")
        kind = names_.get("kind")
        if isinstance(kind, str) and kind:
            names_.setdefault("singular", kind.lower())
            names_.setdefault("listKind", f"{kind}List")
        conversion = spec.setdefault("conversion", {"strategy": "None"})
        service = get(conversion, "webhook", "clientConfig", "service")
        if isinstance(service, dict):
            service.setdefault("port", 443)

    def prepare_create(self, obj: Obj) -> None:
        finalizers = ensure(obj, "metadata").setdefault("finalizers", [])
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)

    def initial_status(self, obj: Obj) -> Any:
        return {
            "conditions": [
                _condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                _condition(
                    "Established", "InitialNamesAccepted", "the initial names have been accepted"
                ),
            ],
            "acceptedNames": codec.copy(get(obj, "spec", "names") or {}),
            "storedVersions": [storage_version(obj)],
        }

    def prepare_update(self, new: Obj, old: Obj) -> None:
        status = new.get("status")
        if not isinstance(status, dict) or not status:
            status = new["status"] = self.initial_status(new)
        status["acceptedNames"] = codec.copy(get(new, "spec", "names") or {})
        stored = list(status.get("storedVersions") or [])
        current = storage_version(new)
        if current and current not in stored:
            stored.append(current)
        status["storedVersions"] = stored

    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        group = spec.get("group")
        if not group:
            out.append(errors.required("spec.group"))
        elif "." not in group:
            out.append(
                errors.invalid("spec.group", group, "should be a domain with at least one dot")
            )
        else:
            for problem in names.dns1123_subdomain(group):
                out.append(errors.invalid("spec.group", group, problem))
        names_ = spec.get("names") or {}
        for key in ("plural", "kind"):
            if not names_.get(key):
                out.append(errors.required(f"spec.names.{key}"))
        plural = names_.get("plural")
        if plural:
            for problem in names.dns1123_label(plural):
                out.append(errors.invalid("spec.names.plural", plural, problem))
        singular = names_.get("singular")
        if singular:
            for problem in names.dns1123_label(singular):
                out.append(errors.invalid("spec.names.singular", singular, problem))
        for i, short in enumerate(names_.get("shortNames") or ()):
            for problem in names.dns1123_label(short):
                out.append(errors.invalid(f"spec.names.shortNames[{i}]", short, problem))
        name = get(obj, "metadata", "name")
        if plural and group and name != f"{plural}.{group}":
            out.append(
                errors.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
            )
        scope = spec.get("scope")
        if scope not in SCOPES:
            out.append(errors.not_supported("spec.scope", scope, SCOPES))
        out.extend(self._validate_versions(spec.get("versions")))
        out.extend(_conversion_errors(spec.get("conversion")))
        return out

    def _validate_versions(self, versions: Any) -> list[FieldError]:
        out: list[FieldError] = []
        if not versions:
            return [
                errors.invalid(
                    "spec.versions",
                    versions,
                    "must have exactly one version marked as storage version",
                )
            ]
        seen: set[str] = set()
        storage = 0
        for i, version in enumerate(versions):
            path = f"spec.versions[{i}]"
            vname = version.get("name")
            if not vname:
                out.append(errors.required(f"{path}.name"))
            else:
                for problem in names.dns1123_label(vname):
                    out.append(errors.invalid(f"{path}.name", vname, problem))
                if vname in seen:
                    out.append(errors.duplicate(f"{path}.name", vname))
                seen.add(vname)
            if version.get("storage"):
                storage += 1
            schema = get(version, "schema", "openAPIV3Schema")
            spath = f"{path}.schema.openAPIV3Schema"
            if not isinstance(schema, dict):
                out.append(errors.required(spath, "schemas are required"))
                continue
            out.extend(_structural_errors(schema, spath, root=True))
            out.extend(cel.compile_errors(schema, spath))
            out.extend(_scale_errors(version.get("subresources"), f"{path}.subresources"))
            for j, column in enumerate(version.get("additionalPrinterColumns") or ()):
                cpath = f"{path}.additionalPrinterColumns[{j}]"
                for key in ("name", "type", "jsonPath"):
                    if not column.get(key):
                        out.append(errors.required(f"{cpath}.{key}"))
                if column.get("type") and column["type"] not in (
                    "integer",
                    "number",
                    "string",
                    "boolean",
                    "date",
                ):
                    out.append(
                        errors.not_supported(
                            f"{cpath}.type",
                            column["type"],
                            ("boolean", "date", "integer", "number", "string"),
                        )
                    )
                if column.get("jsonPath"):
                    try:
                        jsonpath.compile_path(column["jsonPath"])
                    except jsonpath.JSONPathError as exc:
                        out.append(
                            errors.invalid(f"{cpath}.jsonPath", column["jsonPath"], str(exc))
                        )
        if storage != 1:
            out.append(
                errors.invalid(
                    "spec.versions",
                    versions,
                    "must have exactly one version marked as storage version",
                )
            )
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        for key in ("scope", "group"):
            if get(new, "spec", key) != get(old, "spec", key):
                out.append(errors.immutable(f"spec.{key}", get(new, "spec", key)))
        if get(new, "spec", "names", "plural") != get(old, "spec", "names", "plural"):
            out.append(errors.immutable("spec.names.plural", get(new, "spec", "names", "plural")))
        stored = get(old, "status", "storedVersions") or []
        served = {v.get("name") for v in get(new, "spec", "versions") or ()}
        missing = [v for v in stored if v not in served]
        if missing:
            out.append(
                errors.invalid(
                    "status.storedVersions", stored, f"must appear in spec.versions: {missing}"
                )
            )
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Created At",
                "date",
                lambda o: get(o, "metadata", "creationTimestamp"),
                "",
                columns.CREATED_DESCRIPTION,
            ),
        ]


def _conversion_errors(conversion: Any) -> list[FieldError]:
    """``spec.conversion``, with the paths of the server's internal version, as upstream
    reports them (``spec.conversion.webhookClientConfig``, ``.conversionReviewVersions``)."""
    if not isinstance(conversion, dict):
        return []
    path = "spec.conversion"
    strategy = conversion.get("strategy")
    webhook = conversion.get("webhook")
    webhook = webhook if isinstance(webhook, dict) else None
    client = webhook.get("clientConfig") if webhook is not None else None
    versions = webhook.get("conversionReviewVersions") if webhook is not None else None
    if not strategy:
        out = [errors.required(f"{path}.strategy")]
    elif strategy not in CONVERSION_STRATEGIES:
        out = [errors.not_supported(f"{path}.strategy", strategy, CONVERSION_STRATEGIES)]
    else:
        out = []
    if strategy != "Webhook":
        if isinstance(client, dict):
            out.append(errors.forbidden(f"{path}.webhookClientConfig", NOT_WEBHOOK))
        if versions:
            out.append(errors.forbidden(f"{path}.conversionReviewVersions", NOT_WEBHOOK))
        return out
    if not isinstance(client, dict):
        out.append(
            errors.required(
                f"{path}.webhookClientConfig", "required when strategy is set to Webhook"
            )
        )
    else:
        out.extend(_client_config_errors(client, f"{path}.webhookClientConfig"))
    out.extend(_review_version_errors(versions, f"{path}.conversionReviewVersions"))
    return out


def _client_config_errors(client: dict[str, Any], path: str) -> list[FieldError]:
    """Exactly one of ``url`` (https, with a host, no user, query or fragment) and
    ``service`` (name, namespace, a path from ``/``, a port in 1-65535)."""
    url, service = client.get("url"), client.get("service")
    if (url is None) == (service is None):
        return [errors.required(path, "exactly one of url or service is required")]
    if url is not None:
        parsed = urlsplit(str(url))
        problems = [
            (parsed.scheme != "https", "'https' is the only allowed URL scheme"),
            (not parsed.hostname, "host must be specified"),
            (bool(parsed.username), "user information is not permitted in the URL"),
            (bool(parsed.fragment), "fragments are not permitted in the URL"),
            (bool(parsed.query), "query parameters are not permitted in the URL"),
        ]
        return [errors.invalid(f"{path}.url", url, why) for bad, why in problems if bad]
    out: list[FieldError] = []
    spath = f"{path}.service"
    if not isinstance(service, dict):
        return [errors.required(spath, "")]
    for key in ("name", "namespace"):
        if not service.get(key):
            out.append(errors.required(f"{spath}.{key}", "service " + key + " is required"))
    route = service.get("path")
    if route is not None and not str(route).startswith("/"):
        out.append(errors.invalid(f"{spath}.path", route, "must start with a '/'"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        out.append(
            errors.invalid(
                f"{spath}.port", port, "port is not valid: must be between 1 and 65535, inclusive"
            )
        )
    return out


def _review_version_errors(versions: Any, path: str) -> list[FieldError]:
    if not versions:
        return [errors.required(path)]
    out: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            out.append(errors.invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        for problem in names.dns1123_label(str(version)):
            out.append(errors.invalid(f"{path}[{i}]", version, problem))
    if not seen & set(REVIEW_VERSIONS):
        out.append(
            errors.invalid(
                path, versions, f"must include at least one of {', '.join(REVIEW_VERSIONS)}"
            )
        )
    return out


def webhook_conversion(crd: Obj) -> WebhookConversion | None:
    """The conversion webhook of a (valid) CRD with ``strategy: Webhook``."""
    conversion = get(crd, "spec", "conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    webhook = conversion.get("webhook") or {}
    return WebhookConversion(
        client_config=codec.copy(webhook.get("clientConfig") or {}),
        review_versions=tuple(webhook.get("conversionReviewVersions") or ()),
    )


def _structural_errors(node: Any, path: str, *, root: bool = False) -> list[FieldError]:
    out: list[FieldError] = []
    if not isinstance(node, dict):
        return [errors.type_invalid(path, node, "must be an object")]
    kind = node.get("type")
    special = node.get("x-kubernetes-int-or-string") or node.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if root:
        if kind != "object":
            out.append(
                errors.required(f"{path}.type", "must not be empty at the root")
                if kind is None
                else errors.invalid(f"{path}.type", kind, "must be object at the root")
            )
    elif kind is None and not special:
        out.append(errors.required(f"{path}.type", "must not be empty for specified object fields"))
    if kind is not None and kind not in TYPES:
        out.append(errors.not_supported(f"{path}.type", kind, TYPES))
    props = node.get("properties")
    extra = node.get("additionalProperties")
    if props and isinstance(extra, dict | bool) and extra is not False:
        out.append(
            errors.forbidden(
                f"{path}.additionalProperties",
                "additionalProperties and properties are mutual exclusive",
            )
        )
    if node.get("x-kubernetes-list-type") == "map" and not node.get("x-kubernetes-list-map-keys"):
        out.append(
            errors.required(
                f"{path}.x-kubernetes-list-map-keys",
                "must not be empty if x-kubernetes-list-type is map",
            )
        )
    if kind == "array" and not isinstance(node.get("items"), dict):
        out.append(errors.required(f"{path}.items", "must be specified"))
    for key, sub in (props or {}).items():
        if root and key == "metadata":
            extra_meta = set((sub or {}).get("properties") or {}) - {"name", "generateName"}
            if extra_meta:
                out.append(
                    errors.forbidden(
                        f"{path}.properties[metadata]",
                        "must not specify anything other than name and generateName, but "
                        "metadata is implicitly specified",
                    )
                )
            continue
        out.extend(_structural_errors(sub, f"{path}.properties[{key}]"))
    if isinstance(extra, dict):
        out.extend(_structural_errors(extra, f"{path}.additionalProperties"))
    if isinstance(node.get("items"), dict):
        out.extend(_structural_errors(node["items"], f"{path}.items"))
    return out


# -- custom resources ---------------------------------------------------------------------------


def _field_getter(path: str) -> Any:
    steps = jsonpath.compile_path(path)

    def getter(obj: Obj) -> str:
        found = jsonpath.evaluate(steps, obj)
        if not found or found[0] is None:
            return ""
        value = found[0]
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return getter


SCALE_PATHS = (
    ("specReplicasPath", (".spec.",), "should be a json path under .spec"),
    ("statusReplicasPath", (".status.",), "should be a json path under .status"),
    (
        "labelSelectorPath",
        (".spec.", ".status."),
        "should be a json path under either .spec or .status",
    ),
)


def _scale_errors(subresources: Any, path: str) -> list[FieldError]:
    """A declared scale subresource names its replica paths under .spec and .status."""
    scale = subresources.get("scale") if isinstance(subresources, dict) else None
    if not isinstance(scale, dict):
        return []
    out: list[FieldError] = []
    for key, prefixes, message in SCALE_PATHS:
        value = scale.get(key)
        field = f"{path}.scale.{key}"
        if not value:
            if key != "labelSelectorPath":
                out.append(errors.required(field))
            continue
        if not isinstance(value, str) or not value.startswith(prefixes):
            out.append(errors.invalid(field, value, message))
    return out


class CustomResourceStrategy(Strategy):
    has_generation = True
    allow_unconditional_update = False

    def __init__(self, *, schema: Schema, status: bool, selectable: dict[str, Any]) -> None:
        self.schema = schema
        self.status_subresource = status
        self.field_getters = selectable
        self.rules = cel.RuleChecker(schema)

    def default(self, obj: Obj) -> None:
        self.schema.apply_defaults(obj)

    def validate(self, obj: Obj) -> list[FieldError]:
        return self._with_rules(self.schema.validate(obj), obj, cel.MISSING)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self._with_rules(self.schema.validate(new), new, old)

    def _with_rules(self, found: list[FieldError], new: Obj, old: Any) -> list[FieldError]:
        # As on the real server, CEL rules are skipped once the object has structural errors.
        if any(e.type in BLOCKING for e in found):
            return [*found, errors.invalid("<nil>", None, RULES_SKIPPED)]
        return found + self.rules.check(new, old)


def resource_types(crd: Obj) -> list[ResourceType]:
    """One ResourceType per served version of a (valid) CRD."""
    spec = crd["spec"]
    names_ = spec["names"]
    group = spec["group"]
    plural = names_["plural"]
    stored = storage_version(crd)
    webhook = webhook_conversion(crd)
    out = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        schema = Schema(get(version, "schema", "openAPIV3Schema") or {"type": "object"}, mode="crd")
        selectable = {
            s["jsonPath"].lstrip("."): _field_getter(s["jsonPath"])
            for s in version.get("selectableFields") or ()
            if s.get("jsonPath")
        }
        printer_specs = version.get("additionalPrinterColumns")
        if printer_specs is None:
            printer_specs = [
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
            ]
        declared = version.get("subresources") or {}
        has_status = "status" in declared
        scale = declared.get("scale")
        paths = ScalePaths.of_crd(scale) if isinstance(scale, dict) else None
        strategy = CustomResourceStrategy(schema=schema, status=has_status, selectable=selectable)
        out.append(
            ResourceType(
                group=group,
                version=version["name"],
                plural=plural,
                singular=names_.get("singular") or names_["kind"].lower(),
                kind=names_["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                strategy=strategy,
                storage=f"{group}/{plural}",
                storage_version=stored,
                short_names=tuple(names_.get("shortNames") or ()),
                categories=tuple(names_.get("categories") or ()),
                subresources=(("status",) if has_status else ())
                + (("scale",) if paths is not None else ()),
                scale=paths,
                schema=schema,
                webhook=webhook,
                custom=True,
                crd_name=crd["metadata"]["name"],
                printer_columns=tuple(columns.printer_column(c) for c in printer_specs),
                selectable=tuple(selectable),
            )
        )
    out.sort(key=lambda rt: version_priority(rt.version))
    return out
