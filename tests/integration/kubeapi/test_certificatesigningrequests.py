"""CertificateSigningRequest writes over HTTP: what the ``approval`` and ``status`` subresources
and the main resource may change, and the field each refusal names (kube-apiserver's rules,
plus the emulator's stricter one that a certificate follows approval)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.integration.kubeapi.conftest import Http

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SIGNER = "example.com/test"
APPROVED = {"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}
DENIED = {"type": "Denied", "status": "True", "reason": "Test", "message": "no"}


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _request(key: ec.EllipticCurvePrivateKey) -> str:
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(_name("node-a"))
        .sign(key, hashes.SHA256())
    )
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def _certificate(key: ec.EllipticCurvePrivateKey, serial: int) -> str:
    """A self-signed certificate (the API server checks the PEM shape, not the issuer)."""
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("node-a"))
        .issuer_name(_name("test-ca"))
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


async def _create(http: Http, name: str, key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": _request(key), "signerName": SIGNER, "usages": ["client auth"]},
    }
    status, created, _ = await http.post(CSRS, body)
    assert status == 201, created
    return dict(created)


async def _write(
    http: Http, obj: dict[str, Any], subresource: str, status: dict[str, Any]
) -> tuple[int, Any]:
    """PUT ``obj`` with ``status`` through ``subresource`` ("" for the main resource)."""
    suffix = f"/{subresource}" if subresource else ""
    code, body, _ = await http.put(
        f"{CSRS}/{obj['metadata']['name']}{suffix}", {**obj, "status": status}
    )
    return code, body


def _refusal(code: int, body: Any) -> list[tuple[str, str]]:
    """The (field, message) causes of a 422 Invalid answer."""
    assert code == 422, body
    assert body["reason"] == "Invalid"
    return [(cause["field"], cause["message"]) for cause in body["details"]["causes"]]


async def _stored(http: Http, name: str) -> dict[str, Any]:
    code, body, _ = await http.get(f"{CSRS}/{name}")
    assert code == 200, body
    return dict(body)


def _types(obj: dict[str, Any]) -> list[str]:
    return [c["type"] for c in (obj.get("status") or {}).get("conditions") or ()]


async def test_approval_conditions_exclude_each_other_and_are_never_removed(http: Http) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    created = await _create(http, "both", key)

    code, body = await _write(http, created, "approval", {"conditions": [APPROVED, DENIED]})
    causes = _refusal(code, body)
    assert (
        "status.conditions[1].type",
        'Invalid value: "Denied": Approved and Denied conditions are mutually exclusive',
    ) in causes
    assert _types(await _stored(http, "both")) == []

    code, body = await _write(http, created, "approval", {"conditions": [APPROVED]})
    assert code == 200, body
    code, body = await _write(http, body, "approval", {"conditions": []})
    assert (
        "status.conditions",
        'Forbidden: updates may not remove a condition of type "Approved"',
    ) in _refusal(code, body)
    # Through status as well; and the signer's status write may not add a Denied.
    code, body = await _write(http, await _stored(http, "both"), "status", {"conditions": []})
    assert (
        "status.conditions",
        'Forbidden: updates may not remove a condition of type "Approved"',
    ) in _refusal(code, body)
    current = await _stored(http, "both")
    denied = {"conditions": [*current["status"]["conditions"], DENIED]}
    code, body = await _write(http, current, "status", denied)
    assert (
        "status.conditions",
        'Forbidden: updates may not add a condition of type "Denied"',
    ) in _refusal(code, body)
    assert _types(await _stored(http, "both")) == ["Approved"]


async def test_a_certificate_only_after_approval_and_never_replaced(http: Http) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    created = await _create(http, "cert", key)

    code, body = await _write(http, created, "status", {"certificate": _certificate(key, 1)})
    assert (
        "status.certificate",
        'Invalid value: "<certificate data>": certificate may only be '
        "set once the request is approved",
    ) in _refusal(code, body)

    code, approved = await _write(http, created, "approval", {"conditions": [APPROVED]})
    assert code == 200, approved
    first = _certificate(key, 1)
    issued = {**approved["status"], "certificate": first}
    code, body = await _write(http, approved, "status", issued)
    assert code == 200, body

    replaced = {**issued, "certificate": _certificate(key, 2)}
    code, body = await _write(http, body, "status", replaced)
    assert (
        "status.certificate",
        "Forbidden: updates may not modify existing certificate content",
    ) in _refusal(code, body)
    assert (await _stored(http, "cert"))["status"]["certificate"] == first


async def test_the_main_resource_changes_neither_spec_nor_status(http: Http) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    created = await _create(http, "main", key)
    changed = {
        **created,
        "metadata": {**created["metadata"], "labels": {"team": "a"}},
        "spec": {**created["spec"], "signerName": "example.com/other", "usages": ["server auth"]},
    }
    # As kube-apiserver's strategy: spec and status keep the stored values, metadata changes.
    code, body = await _write(http, changed, "", {"conditions": [APPROVED]})
    assert code == 200, body
    stored = await _stored(http, "main")
    assert stored["metadata"]["labels"] == {"team": "a"}
    assert stored["spec"]["signerName"] == SIGNER
    assert stored["spec"]["usages"] == ["client auth"]
    assert _types(stored) == []
    # Nor does approval change the spec.
    respec = {**stored, "spec": changed["spec"]}
    code, body = await _write(http, respec, "approval", {"conditions": [APPROVED]})
    assert code == 200, body
    stored = await _stored(http, "main")
    assert stored["spec"]["signerName"] == SIGNER
    assert _types(stored) == ["Approved"]
