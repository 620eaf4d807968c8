"""The IMEX signer's approve/deny decision, rule by rule."""

from __future__ import annotations

import base64

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.domain_controller.csrverdict import RequestFacts, decide, facts_of
from services.imex_agent.nodecert import build_request
from shared import imexcert
from shared.kube.reviews import NODE_NAME

AGENT = "system:serviceaccount:cdo-system:cdo-imex-agent"
CN = NameOID.COMMON_NAME.dotted_string
GOOD = RequestFacts(
    username=AGENT,
    nodes=("node-a",),
    subject=((CN, "node-a"),),
    dns_names=("node-a", "cdo-imex"),
    other_names=(),
    usages=imexcert.USAGES,
    key="ec:secp256r1",
)


def test_the_agents_request_for_its_own_node_is_approved() -> None:
    verdict = decide(GOOD, agent_user=AGENT, revoked={})
    assert verdict.approved, verdict


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"username": "system:serviceaccount:tenant:ci"}, "NotImexAgent"),
        ({"nodes": ()}, "NoNodeBinding"),
        ({"nodes": ("node-a", "node-b")}, "NoNodeBinding"),
        ({"subject": ((CN, "node-b"),)}, "SubjectMismatch"),
        (
            {"subject": ((CN, "node-a"), (NameOID.ORGANIZATION_NAME.dotted_string, "x"))},
            "SubjectMismatch",
        ),
        ({"dns_names": ("node-b", "cdo-imex")}, "SubjectAltNameMismatch"),
        ({"dns_names": ("node-a", "cdo-imex", "cdo-nats")}, "SubjectAltNameMismatch"),
        ({"other_names": ("10.0.0.1",)}, "SubjectAltNameMismatch"),
        ({"usages": ("client auth",)}, "UsagesNotAllowed"),
        ({"usages": (*imexcert.USAGES, "cert sign")}, "UsagesNotAllowed"),
        ({"key": "ec:secp192r1"}, "KeyNotAllowed"),
        ({"key": "rsa:1024"}, "KeyNotAllowed"),
    ],
)
def test_each_rule_denies_with_its_reason(change: dict[str, object], reason: str) -> None:
    verdict = decide(msgspec.structs.replace(GOOD, **change), agent_user=AGENT, revoked={})
    assert not verdict.approved
    assert verdict.reason == reason
    assert verdict.message


def test_a_revoked_node_is_denied_with_the_operators_note() -> None:
    verdict = decide(GOOD, agent_user=AGENT, revoked={"node-a": "stolen"})
    assert (verdict.approved, verdict.reason) == (False, "NodeRevoked")
    assert "stolen" in verdict.message and imexcert.REVOCATIONS_CONFIGMAP in verdict.message


def test_the_facts_come_from_the_request_and_the_requester() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    spec = {
        "username": AGENT,
        "extra": {NODE_NAME: ["node-a"]},
        "usages": list(imexcert.USAGES),
        "request": base64.b64encode(build_request("node-a", key)).decode(),
    }
    facts = facts_of(spec, build_request("node-a", key))
    assert decide(facts, agent_user=AGENT, revoked={}).approved
    assert facts.nodes == ("node-a",) and facts.key == "ec:secp256r1"


def test_an_ip_address_name_is_seen() -> None:
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    names = [
        x509.DNSName("node-a"),
        x509.DNSName("cdo-imex"),
        x509.IPAddress(ipaddress.ip_address("10.0.0.9")),
    ]
    pem = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "node-a")]))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
    )
    facts = facts_of(
        {"username": AGENT, "extra": {NODE_NAME: ["node-a"]}, "usages": list(imexcert.USAGES)}, pem
    )
    assert decide(facts, agent_user=AGENT, revoked={}).reason == "SubjectAltNameMismatch"
