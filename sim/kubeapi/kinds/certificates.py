"""``certificates.k8s.io/v1`` CertificateSigningRequest: requester, approval and signing rules.

What kube-apiserver does with a CSR, as its strategies and validation do
(https://kubernetes.io/docs/reference/access-authn-authz/certificate-signing-requests/):

- on create the server records who asked: ``spec.username``, ``spec.uid``, ``spec.groups`` and
  ``spec.extra`` are the authenticated requester's, whatever the client sent; ``status`` is
  cleared. ``spec`` never changes afterwards (an update keeps the stored one);
- ``spec.request`` is a PEM ``CERTIFICATE REQUEST`` block whose signature verifies;
  ``spec.signerName`` is a qualified ``<domain>/<path>``; ``spec.usages`` are known key usages;
  ``spec.expirationSeconds``, when set, is at least 600;
- the ``approval`` subresource changes only ``status.conditions``: ``Approved`` and ``Denied``
  exclude each other (refused at ``status.conditions[i].type``) and are ``True`` when present;
- no write removes an ``Approved``, ``Denied`` or ``Failed`` condition (refused at
  ``status.conditions``, naming the type);
- the ``status`` subresource (the signer's) keeps the ``Approved`` and ``Denied`` conditions as
  they were, and refuses a write that adds one (``updates may not add a condition of type``);
  ``status.certificate`` is PEM certificates and never changes once set (refused at
  ``status.certificate``);
- the main resource changes neither ``spec`` nor ``status``: an update keeps the stored ones, as
  kube-apiserver's strategy does (no error; only metadata changes).

Stricter than kube-apiserver: the emulator also refuses a ``status.certificate`` on a request
that is not approved, or that is denied or failed. The real server leaves that to the signer (the
API reference says the signer sets the certificate once ``Approved`` is present); refusing it
never lets through what a real cluster would refuse, and catches a signer that jumps ahead.

The authorization the real server adds on top (``approve`` and ``sign`` on the ``signers``
resource named by the signer name) is checked in :mod:`sim.kubeapi.auth.signers`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from sim.kubeapi.kinds.common import get
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

APPROVED = "Approved"
DENIED = "Denied"
FAILED = "Failed"
APPROVAL_TYPES = (APPROVED, DENIED)
CONDITION_STATUSES = ("True", "False", "Unknown")
MIN_EXPIRATION_S = 600
KEY_USAGES = (
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
)
_SIGNER = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9][-A-Za-z0-9_./]*$"
)
REQUESTER_FIELDS = ("username", "uid", "groups", "extra")


def pem_bytes(value: Any) -> bytes | None:
    """A ``[]byte`` field as JSON carries it (base64), decoded; None when it is not base64."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _conditions(obj: Obj) -> list[dict[str, Any]]:
    found = get(obj, "status", "conditions")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _types(obj: Obj) -> set[str]:
    return {str(c.get("type")) for c in _conditions(obj)}


def _validate_request(spec: Mapping[str, Any]) -> list[FieldError]:
    raw = pem_bytes(spec.get("request"))
    if spec.get("request") in (None, ""):
        return [errors.required("spec.request")]
    if raw is None:
        return [errors.invalid("spec.request", "<bytes>", "must be base64-encoded PEM")]
    try:
        csr = x509.load_pem_x509_csr(raw)
    except ValueError as exc:
        return [
            errors.invalid(
                "spec.request", "<bytes>", f"PEM block type must be CERTIFICATE REQUEST: {exc}"
            )
        ]
    if not csr.is_signature_valid:
        return [errors.invalid("spec.request", "<bytes>", "x509: invalid signature")]
    return []


def _validate_spec(spec: Any) -> list[FieldError]:
    if not isinstance(spec, dict):
        return [errors.required("spec")]
    out = _validate_request(spec)
    signer = spec.get("signerName")
    if not signer:
        out.append(errors.required("spec.signerName"))
    elif not isinstance(signer, str) or not _SIGNER.match(signer):
        out.append(
            errors.invalid(
                "spec.signerName",
                signer,
                "must be a fully qualified domain and path of the form 'example.com/signer-name'",
            )
        )
    usages = spec.get("usages") or []
    if not isinstance(usages, list):
        out.append(errors.type_invalid("spec.usages", usages, "must be a list"))
    else:
        for i, usage in enumerate(usages):
            if usage not in KEY_USAGES:
                out.append(errors.not_supported(f"spec.usages[{i}]", usage, KEY_USAGES))
    expiration = spec.get("expirationSeconds")
    if expiration is not None and (
        not isinstance(expiration, int) or expiration < MIN_EXPIRATION_S
    ):
        out.append(
            errors.invalid(
                "spec.expirationSeconds",
                expiration,
                "may not specify a duration less than 600 seconds (10 minutes)",
            )
        )
    return out


def _validate_conditions(new: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    seen: set[str] = set()
    for i, cond in enumerate(_conditions(new)):
        kind = cond.get("type")
        if not kind:
            out.append(errors.required(f"status.conditions[{i}].type"))
        elif kind in seen and kind in (*APPROVAL_TYPES, FAILED):
            out.append(errors.duplicate(f"status.conditions[{i}].type", kind))
        elif kind in APPROVAL_TYPES and seen & set(APPROVAL_TYPES):
            out.append(
                errors.invalid(
                    f"status.conditions[{i}].type",
                    kind,
                    "Approved and Denied conditions are mutually exclusive",
                )
            )
        seen.add(str(kind))
        allowed = ("True",) if kind in APPROVAL_TYPES else CONDITION_STATUSES
        if cond.get("status") not in allowed:
            out.append(
                errors.not_supported(f"status.conditions[{i}].status", cond.get("status"), allowed)
            )
    return out


def _validate_certificate(new: Obj) -> list[FieldError]:
    certificate = get(new, "status", "certificate")
    if not certificate:
        return []
    out: list[FieldError] = []
    raw = pem_bytes(certificate)
    if raw is None or not _all_certificates(raw):
        out.append(
            errors.invalid(
                "status.certificate",
                "<certificate data>",
                "must contain at least one CERTIFICATE PEM block",
            )
        )
    types = _types(new)
    if APPROVED not in types:
        out.append(
            errors.invalid(
                "status.certificate",
                "<certificate data>",
                "certificate may only be set once the request is approved",
            )
        )
    if DENIED in types or FAILED in types:
        out.append(
            errors.invalid(
                "status.certificate",
                "<certificate data>",
                "certificate may not be set on a denied or failed request",
            )
        )
    return out


def _count(obj: Obj, kind: str) -> int:
    return sum(1 for c in _conditions(obj) if c.get("type") == kind)


def _validate_status(subresource: str, new: Obj, old: Obj) -> list[FieldError]:
    """A write through ``status`` or ``approval``: see the module docstring."""
    out = _validate_conditions(new)
    certificate = get(new, "status", "certificate")
    before = get(old, "status", "certificate")
    if certificate != before:
        out += _validate_certificate(new)
        if before:
            out.append(
                errors.forbidden(
                    "status.certificate", "updates may not modify existing certificate content"
                )
            )
    for kind in (*APPROVAL_TYPES, FAILED):
        if _count(new, kind) < _count(old, kind):
            out.append(
                errors.forbidden(
                    "status.conditions", f'updates may not remove a condition of type "{kind}"'
                )
            )
        elif (
            subresource != "approval"
            and kind in APPROVAL_TYPES
            and _count(new, kind) > _count(old, kind)
        ):
            out.append(
                errors.forbidden(
                    "status.conditions", f'updates may not add a condition of type "{kind}"'
                )
            )
    return out


def _all_certificates(raw: bytes) -> bool:
    try:
        return bool(x509.load_pem_x509_certificates(raw))
    except ValueError:
        return False


def _keep_instances(new: Obj, old: Obj) -> None:
    """Each ``Approved``/``Denied`` condition of ``new`` replaced by the stored one, in order,
    when ``new`` has as many of that type as ``old``."""
    conditions = _conditions(new)
    for kind in APPROVAL_TYPES:
        stored = [c for c in _conditions(old) if c.get("type") == kind]
        positions = [i for i, c in enumerate(conditions) if c.get("type") == kind]
        if len(stored) == len(positions):
            for position, kept in zip(positions, stored, strict=True):
                conditions[position] = kept
    if conditions:
        new["status"]["conditions"] = conditions


def _stamp_times(new: Obj, old: Obj) -> None:
    """Conditions that are new or changed get ``lastUpdateTime``/``lastTransitionTime`` now."""
    before = {str(c.get("type")): c for c in _conditions(old)}
    now = codec.format_time(codec.now())
    for cond in _conditions(new):
        prior = before.get(str(cond.get("type")))
        if prior is None or prior.get("status") != cond.get("status"):
            cond.setdefault("lastTransitionTime", now)
            cond.setdefault("lastUpdateTime", now)


def _condition_cell(obj: Obj) -> str:
    names = [str(c.get("type")) for c in _conditions(obj) if c.get("status") == "True"]
    if get(obj, "status", "certificate"):
        names.append("Issued")
    return ",".join(names) or "Pending"


class CertificateSigningRequestStrategy(Strategy):
    status_subresource = True
    field_getters = {"spec.signerName": lambda o: str(get(o, "spec", "signerName") or "")}

    def prepare_create(self, obj: Obj) -> None:
        obj.pop("status", None)

    def stamp_requester(self, obj: Obj, user: Mapping[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        for key in REQUESTER_FIELDS:
            spec.pop(key, None)
            if user.get(key):
                spec[key] = user[key]

    def prepare_update(self, new: Obj, old: Obj) -> None:
        new["spec"] = old.get("spec")

    def prepare_subresource_update(self, subresource: str, new: Obj, old: Obj) -> None:
        new["spec"] = old.get("spec")
        status = new.setdefault("status", {})
        if subresource == "approval":
            # Only the conditions come from the client; the issued certificate stays.
            certificate = get(old, "status", "certificate")
            status.pop("certificate", None)
            if certificate:
                status["certificate"] = certificate
        elif subresource == "status":
            # The signer may not approve or deny: a write that keeps as many Approved and
            # Denied conditions gets the stored ones back; one that adds or drops one is
            # refused by validation.
            _keep_instances(new, old)
        _stamp_times(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        return _validate_spec(obj.get("spec"))

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return []

    def validate_subresource_update(self, subresource: str, new: Obj, old: Obj) -> list[FieldError]:
        return _validate_status(subresource, new, old)

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            columns.age_column(),
            Column(
                "SignerName",
                "string",
                lambda o: str(get(o, "spec", "signerName") or ""),
                "",
                "The signer the request is for.",
            ),
            Column(
                "Requestor",
                "string",
                lambda o: str(get(o, "spec", "username") or ""),
                "",
                "Who created the request.",
            ),
            Column(
                "Condition",
                "string",
                _condition_cell,
                "",
                "Approved, Denied, Failed, Issued or Pending.",
            ),
        ]
