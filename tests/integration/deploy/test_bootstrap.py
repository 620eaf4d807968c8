"""The bootstrap program's certificates: what they name, and when they are issued again."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import msgspec
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from services.nats_auth.nkeyjwt import Signer
from shared.crds import install_crds
from shared.crds.definitions import compute_domain_crd, placement_crd
from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.kube.resources import NAMESPACES
from tests.integration.deploy.conftest import NAMESPACE, load_bootstrap

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
bootstrap: Any = load_bootstrap()


def names_of(pem: bytes) -> list[str]:
    cert = x509.load_pem_x509_certificate(pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return sorted(str(name.value) for name in sans)


def test_webhook_certificate_names_the_service_and_expires_in_a_year() -> None:
    ca = bootstrap.new_ca(now=NOW)
    names = bootstrap.service_names(bootstrap.WEBHOOK_SERVICE, NAMESPACE)
    assert names[0] == f"cdo-clique-allocator.{NAMESPACE}.svc"
    leaf = bootstrap.issue(ca, names=names, client=False, now=NOW)
    cert = x509.load_pem_x509_certificate(leaf.cert)
    assert names_of(leaf.cert) == sorted(names)
    assert cert.not_valid_after_utc - NOW == bootstrap.LEAF_LIFETIME
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert))


def test_nats_certificate_covers_the_client_url_and_the_routes() -> None:
    names = bootstrap.nats_names(NAMESPACE)
    assert "cdo-nats" in names  # CDO_NATS_URL=tls://cdo-nats:4222
    assert f"*.cdo-nats-headless.{NAMESPACE}.svc" in names  # the cluster routes


def test_still_good_until_thirty_days_before_expiry() -> None:
    ca = bootstrap.new_ca(now=NOW)
    names = ["a.example"]
    leaf = bootstrap.issue(ca, names=names, client=True, now=NOW)
    assert bootstrap.still_good(leaf, ca=ca, names=names, now=NOW)
    assert bootstrap.still_good(leaf, ca=ca, names=names, now=NOW + dt.timedelta(days=330))
    assert not bootstrap.still_good(leaf, ca=ca, names=names, now=NOW + dt.timedelta(days=340))
    assert not bootstrap.still_good(leaf, ca=ca, names=["b.example"], now=NOW)
    other = bootstrap.new_ca(now=NOW)
    assert not bootstrap.still_good(leaf, ca=other, names=names, now=NOW)


class _Secret(msgspec.Struct):
    data: dict[str, str]


async def secret(client: KubeClient, name: str) -> dict[str, str]:
    raw = await client.get(bootstrap.SECRETS, name, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=_Secret).data


async def test_renewal_keeps_passwords_and_reissues_expiring_certificates(
    kube_client: KubeClient,
) -> None:
    await kube_client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    await kube_client.create(
        bootstrap.MUTATING_WEBHOOKS,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": bootstrap.WEBHOOK_CONFIGURATION},
            "webhooks": [
                {
                    "name": "pod-gate.clique-allocator.cdo.dev",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "clientConfig": {
                        "service": {"namespace": NAMESPACE, "name": "cdo-clique-allocator"}
                    },
                }
            ],
        },
    )
    await kube_client.create(
        bootstrap.VALIDATING_WEBHOOKS,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": bootstrap.WEBHOOK_CONFIGURATION},
            "webhooks": [
                {
                    "name": "channel-allocation.clique-allocator.cdo.dev",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "clientConfig": {
                        "service": {"namespace": NAMESPACE, "name": "cdo-clique-allocator"}
                    },
                }
            ],
        },
    )
    await install_crds(kube_client)
    settings = bootstrap.BootstrapSettings(namespace=NAMESPACE)
    program = bootstrap.Bootstrap(kube_client, settings=settings)
    await program.run(NOW)
    passwords = await secret(kube_client, bootstrap.NATS_USERS_SECRET)
    webhook = await secret(kube_client, bootstrap.WEBHOOK_SECRET)
    ca = await secret(kube_client, bootstrap.CA_SECRET)

    await program.run(NOW + dt.timedelta(days=100))
    assert await secret(kube_client, bootstrap.WEBHOOK_SECRET) == webhook

    await program.run(NOW + dt.timedelta(days=340))
    renewed = await secret(kube_client, bootstrap.WEBHOOK_SECRET)
    assert renewed["tls.crt"] != webhook["tls.crt"]
    assert renewed["ca.crt"] == webhook["ca.crt"] == ca["tls.crt"]
    assert await secret(kube_client, bootstrap.NATS_USERS_SECRET) == passwords
    # The webhooks the allocator serves trust that CA.
    crd = msgspec.json.decode(await kube_client.get(bootstrap.CRDS, bootstrap.CONVERSION_CRD))
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == ca["tls.crt"]
    hooks = msgspec.json.decode(
        await kube_client.get(bootstrap.MUTATING_WEBHOOKS, bootstrap.WEBHOOK_CONFIGURATION)
    )
    assert [w["clientConfig"]["caBundle"] for w in hooks["webhooks"]] == [ca["tls.crt"]]
    hooks = msgspec.json.decode(
        await kube_client.get(bootstrap.VALIDATING_WEBHOOKS, bootstrap.WEBHOOK_CONFIGURATION)
    )
    assert [w["clientConfig"]["caBundle"] for w in hooks["webhooks"]] == [ca["tls.crt"]]


def test_the_ca_bundle_patch_covers_webhooks_and_a_conversion_webhook() -> None:
    configuration = {"webhooks": [{"name": "a", "clientConfig": {"caBundle": "old"}}]}
    assert bootstrap.ca_bundle_patch(configuration, "new") == [
        {"op": "test", "path": "/webhooks/0/name", "value": "a"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "new"},
    ]
    crd = {"spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {}}}}}
    assert bootstrap.ca_bundle_patch(crd, "new") == [
        {"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"},
        {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": "new"},
    ]
    assert bootstrap.ca_bundle_patch({"spec": {"conversion": {"strategy": "None"}}}, "x") == []
    done = {
        "spec": {
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"caBundle": "x"}}}
        }
    }
    assert bootstrap.ca_bundle_patch(done, "x") == []


async def test_the_auth_callout_issuer_is_made_once_and_kept(kube_client: KubeClient) -> None:
    await kube_client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    settings = bootstrap.BootstrapSettings(
        namespace=NAMESPACE, certificates=False, nats_auth_callout=True
    )
    program = bootstrap.Bootstrap(kube_client, settings=settings)
    await program.run(NOW)
    issuer = await secret(kube_client, bootstrap.NATS_AUTH_ISSUER_SECRET)
    seed, public = (base64.b64decode(issuer[key]) for key in ("seed", "public"))
    assert seed.startswith(b"SA")
    # The seed is the authenticator's signer; its public key is the servers' issuer.
    assert Signer.from_seed(seed).public_key == public.decode()
    assert bootstrap.NATS_AUTH_USER in await secret(kube_client, bootstrap.NATS_USERS_SECRET)

    await program.run(NOW)
    assert await secret(kube_client, bootstrap.NATS_AUTH_ISSUER_SECRET) == issuer

    # A damaged key is replaced by a whole one.
    await kube_client.patch(
        bootstrap.SECRETS,
        bootstrap.NATS_AUTH_ISSUER_SECRET,
        {"data": {"seed": base64.b64encode(b"SAbroken").decode()}},
        namespace=NAMESPACE,
    )
    await program.run(NOW)
    replaced = await secret(kube_client, bootstrap.NATS_AUTH_ISSUER_SECRET)
    assert replaced != issuer
    assert bootstrap.issuer_still_good({k: base64.b64decode(v) for k, v in replaced.items()})


class _ConversionClientConfig(msgspec.Struct, rename="camel"):
    ca_bundle: str = ""


class _ConversionWebhook(msgspec.Struct, rename="camel"):
    client_config: _ConversionClientConfig


class _Conversion(msgspec.Struct):
    strategy: str
    webhook: _ConversionWebhook | None = None


class _CrdSpec(msgspec.Struct):
    conversion: _Conversion


class _Crd(msgspec.Struct):
    spec: _CrdSpec


async def conversion_bundle(client: KubeClient, name: str) -> str:
    raw = await client.get(bootstrap.CRDS, name)
    webhook = msgspec.json.decode(raw, type=_Crd).spec.conversion.webhook
    assert webhook is not None
    return webhook.client_config.ca_bundle


async def test_a_conversion_webhooks_certificate_is_one_more_entry(
    kube_client: KubeClient,
) -> None:
    """A CRD's conversion webhook, served by a Service of cdo's: its certificate, and the CA in
    the CRD's ``spec.conversion.webhook.clientConfig.caBundle``."""
    await kube_client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    crd = compute_domain_crd()
    name = crd["metadata"]["name"]
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {"namespace": NAMESPACE, "name": "cdo-conversion", "path": "/convert"}
            },
        },
    }
    await kube_client.create(bootstrap.CRDS, crd)
    entry = bootstrap.ServingCertificate(
        secret="cdo-conversion-tls", service="cdo-conversion", conversion_crds=(name,)
    )
    program = bootstrap.Bootstrap(
        kube_client, settings=bootstrap.BootstrapSettings(namespace=NAMESPACE)
    )
    ca = await program.ca(NOW)
    await program.serving_certificate(entry, ca=ca, now=NOW)
    assert base64.b64decode(await conversion_bundle(kube_client, name)) == ca.cert
    issued = await secret(kube_client, "cdo-conversion-tls")
    assert names_of(base64.b64decode(issued["tls.crt"])) == sorted(
        bootstrap.service_names("cdo-conversion", NAMESPACE)
    )
    # Nothing to do the next day; a CRD without a conversion webhook is named in the error.
    await program.serving_certificate(entry, ca=ca, now=NOW + dt.timedelta(days=1))
    assert await secret(kube_client, "cdo-conversion-tls") == issued
    placements = placement_crd()
    await kube_client.create(bootstrap.CRDS, placements)
    wrong = bootstrap.ServingCertificate(
        secret="cdo-conversion-tls",
        service="cdo-conversion",
        conversion_crds=(placements["metadata"]["name"],),
    )
    with pytest.raises(ConfigError, match=r"placements\.cdo\.dev has no webhook"):
        await program.serving_certificate(wrong, ca=ca, now=NOW)
