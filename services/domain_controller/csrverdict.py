"""Whether the IMEX signer approves a CertificateSigningRequest: a pure decision.

A request for :data:`shared.imexcert.SIGNER_NAME` is approved only when all of these hold,
checked in this order; the first that fails is the denial's reason (the ``Denied`` condition's
``reason`` and ``message``, and an Event on the request):

========================  ======================================================================
reason                    the rule
========================  ======================================================================
``NotImexAgent``          ``spec.username`` (set by the API server from the requester's token)
                          is the IMEX agent's ServiceAccount user
``NoNodeBinding``         the requester's token names exactly one node
                          (``spec.extra["authentication.kubernetes.io/node-name"]``, pod-bound
                          tokens since Kubernetes 1.32)
``NodeRevoked``           that node is not listed in the revocations ConfigMap
``SubjectMismatch``       the request's subject is exactly ``CN=<that node>``
``SubjectAltNameMismatch``its DNS names are exactly ``<that node>`` and the IMEX name; no IP,
                          e-mail or URI names
``UsagesNotAllowed``      ``spec.usages`` are exactly digital signature, server and client auth
``KeyNotAllowed``         the key is ECDSA P-256 or P-384, or RSA of 2048 bits or more
========================  ======================================================================

So a node's agent obtains a certificate for its own node only, and a revoked node none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from shared import imexcert
from shared.kube.reviews import NODE_NAME

ALLOWED_CURVES = ("secp256r1", "secp384r1")
MIN_RSA_BITS = 2048


class RequestFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the decision reads of one request (parsed by :func:`facts_of`)."""

    username: str
    nodes: tuple[str, ...]
    """The requester's ``authentication.kubernetes.io/node-name`` values."""
    subject: tuple[tuple[str, str], ...]
    """The subject's attributes as (OID dotted string, value)."""
    dns_names: tuple[str, ...]
    other_names: tuple[str, ...]
    """IP addresses, e-mail addresses and URIs the request asks for."""
    usages: tuple[str, ...]
    key: str
    """``ec:<curve>``, ``rsa:<bits>`` or the key's type name."""


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    approved: bool
    reason: str
    message: str


class UnreadableRequestError(ValueError):
    """``spec.request`` is not a PEM certificate request (the API server checks it too)."""


def _key_text(csr: x509.CertificateSigningRequest) -> str:
    key = csr.public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"ec:{key.curve.name}"
    if isinstance(key, rsa.RSAPublicKey):
        return f"rsa:{key.key_size}"
    return type(key).__name__


def facts_of(spec: Mapping[str, Any], request_pem: bytes) -> RequestFacts:
    """The facts of a CSR's ``spec`` and its decoded ``spec.request``."""
    try:
        csr = x509.load_pem_x509_csr(request_pem)
    except ValueError as exc:
        raise UnreadableRequestError(str(exc)) from exc
    try:
        sans = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = tuple(sans.get_values_for_type(x509.DNSName))
        other = tuple(
            str(value)
            for kind in (x509.IPAddress, x509.RFC822Name, x509.UniformResourceIdentifier)
            for value in sans.get_values_for_type(kind)
        )
    except x509.ExtensionNotFound:
        dns, other = (), ()
    extra = spec.get("extra") or {}
    nodes = extra.get(NODE_NAME) if isinstance(extra, Mapping) else None
    return RequestFacts(
        username=str(spec.get("username") or ""),
        nodes=tuple(str(n) for n in nodes) if isinstance(nodes, list) else (),
        subject=tuple((a.oid.dotted_string, str(a.value)) for a in csr.subject),
        dns_names=dns,
        other_names=other,
        usages=tuple(str(u) for u in spec.get("usages") or ()),
        key=_key_text(csr),
    )


def _key_allowed(key: str) -> bool:
    kind, _, detail = key.partition(":")
    if kind == "ec":
        return detail in ALLOWED_CURVES
    if kind == "rsa":
        return detail.isdigit() and int(detail) >= MIN_RSA_BITS
    return False


def _deny(reason: str, message: str) -> Verdict:
    return Verdict(approved=False, reason=reason, message=message)


def decide(facts: RequestFacts, *, agent_user: str, revoked: Mapping[str, str]) -> Verdict:
    """Approve or deny one request; see the module docstring for the rules."""
    if facts.username != agent_user:
        return _deny(
            "NotImexAgent",
            f"requested by {facts.username or '(nobody)'}; only the IMEX agent ({agent_user}) "
            "may request IMEX certificates",
        )
    if len(facts.nodes) != 1 or not facts.nodes[0]:
        return _deny(
            "NoNodeBinding",
            f"the requester's token names no single node ({NODE_NAME}); the IMEX agent must "
            "use a pod-bound ServiceAccount token (Kubernetes 1.32 or newer)",
        )
    node = facts.nodes[0]
    if node in revoked:
        why = revoked[node]
        return _deny(
            "NodeRevoked",
            f"node {node}'s IMEX certificate is revoked in ConfigMap "
            f"{imexcert.REVOCATIONS_CONFIGMAP}" + (f" ({why})" if why else ""),
        )
    wanted_subject = ((NameOID.COMMON_NAME.dotted_string, node),)
    if facts.subject != wanted_subject:
        return _deny(
            "SubjectMismatch",
            f"the subject must be CN={node}, the requester's node; got "
            f"{_subject_text(facts.subject)}",
        )
    wanted_dns = sorted({node, imexcert.IMEX_NAME})
    if sorted(facts.dns_names) != wanted_dns or facts.other_names:
        return _deny(
            "SubjectAltNameMismatch",
            f"the DNS names must be exactly {', '.join(wanted_dns)} and nothing else; got "
            f"{', '.join([*facts.dns_names, *facts.other_names]) or 'none'}",
        )
    if sorted(facts.usages) != sorted(imexcert.USAGES):
        return _deny(
            "UsagesNotAllowed",
            f"the usages must be exactly {', '.join(imexcert.USAGES)}; got "
            f"{', '.join(facts.usages) or 'none'}",
        )
    if not _key_allowed(facts.key):
        return _deny(
            "KeyNotAllowed",
            f"the key must be ECDSA P-256 or P-384, or RSA of {MIN_RSA_BITS} bits or more; "
            f"got {facts.key}",
        )
    return Verdict(
        approved=True,
        reason="ImexNodeCertificate",
        message=f"the IMEX agent of node {node} asked for its own node's certificate",
    )


def _subject_text(subject: Sequence[tuple[str, str]]) -> str:
    names = {NameOID.COMMON_NAME.dotted_string: "CN", NameOID.ORGANIZATION_NAME.dotted_string: "O"}
    return ",".join(f"{names.get(oid, oid)}={value}" for oid, value in subject) or "(empty)"
