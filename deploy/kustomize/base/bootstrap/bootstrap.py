"""cdo-bootstrap: the Secrets a cdo installation needs, made at install and kept current.

Run by the ``cdo-bootstrap`` Job at install (and on every later ``kubectl apply`` after the Job
has expired) and by the ``cdo-bootstrap`` CronJob every day, with the same pod template and
settings; every step is idempotent and keeps what is still good, so a run that finds nothing to
do writes nothing:

1. ``cdo-nats-users``: one random password per NATS user (keys are added, never changed);
2. ``cdo-ca``: a private CA (ECDSA P-256, 10 years) that signs the certificates below;
3. every serving certificate of :data:`SERVING_CERTIFICATES`, one per webhook Service the API
   server calls: issued for ``<service>.<namespace>.svc``, and the CA written into the caBundle
   of the webhook configurations and CRD conversion webhooks that call it (today the
   allocator's ``cdo-clique-allocator-webhook-tls``, for its pod webhook, the
   MutatingWebhookConfiguration ``cdo-clique-allocator``, its channel allocation webhook, the
   ValidatingWebhookConfiguration ``cdo-clique-allocator``, and its ComputeDomain conversion
   webhook, of the CRD ``computedomains.resource.nvidia.com``);
4. with ``CDO_BOOTSTRAP_TLS_CERTS=true`` (the tls component): ``cdo-nats-tls`` (the NATS
   servers' certificate, also their identity on the routes between them); with
   ``CDO_BOOTSTRAP_IMEX_CA=true`` (the imex-tls component) ``cdo-imex-ca``, the CA of the
   nodes' own IMEX certificates (each node's agent requests its own; the domain controller
   signs them, services/domain_controller/imexsigner.py). nats-server reads its certificate
   only at start, so when ``cdo-nats-tls`` is issued again the StatefulSet ``cdo-nats`` is
   restarted as ``kubectl rollout restart`` does
   (an annotation on its pod template; the servers are replaced one at a time);
5. with ``CDO_BOOTSTRAP_NATS_AUTH_CALLOUT=true`` (the nats-auth-callout component):
   ``cdo-nats-auth-issuer``, the account nkey that signs the users the NATS authenticator
   issues (``seed``, secret, for the authenticator; ``public``, for the servers'
   ``auth_callout.issuer``), made once and kept; and the ``nats-auth`` user's password.

A certificate is issued again when it is missing, was not signed by the current CA, names other
hosts, or expires within 30 days: the daily run renews each one a month before it expires. With
cert-manager (its component sets ``CDO_BOOTSTRAP_CERTIFICATES=false``) only the passwords are
made here.

Settings (environment): ``CDO_BOOTSTRAP_NAMESPACE`` (required), ``CDO_BOOTSTRAP_KUBECONFIG``,
``CDO_BOOTSTRAP_CERTIFICATES``, ``CDO_BOOTSTRAP_TLS_CERTS``, ``CDO_BOOTSTRAP_IMEX_CA``,
``CDO_BOOTSTRAP_NATS_USERS``, ``CDO_BOOTSTRAP_NATS_AUTH_CALLOUT``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import logging
import secrets
import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import msgspec
import nkeys
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from msgspec import Meta

from shared import imexcert
from shared.crds.install import CRDS
from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import STATEFUL_SETS, Resource, core
from shared.settings import Settings, load_settings

log = logging.getLogger("cdo.bootstrap")

SECRETS = core("secrets", "Secret")
MUTATING_WEBHOOKS = Resource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="mutatingwebhookconfigurations",
    kind="MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOKS = Resource(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="validatingwebhookconfigurations",
    kind="ValidatingWebhookConfiguration",
    namespaced=False,
)
NATS_USERS_SECRET = "cdo-nats-users"
CA_SECRET = "cdo-ca"
WEBHOOK_SECRET = "cdo-clique-allocator-webhook-tls"
WEBHOOK_SERVICE = "cdo-clique-allocator"
WEBHOOK_CONFIGURATION = "cdo-clique-allocator"
CONVERSION_CRD = "computedomains.resource.nvidia.com"
NATS_TLS_SECRET = "cdo-nats-tls"
NATS_SERVICE = "cdo-nats"
NATS_STATEFULSET = "cdo-nats"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
"""The pod template annotation ``kubectl rollout restart`` sets: a change rolls the pods."""
NATS_HEADLESS_SERVICE = "cdo-nats-headless"
IMEX_CA_SECRET = imexcert.CA_SECRET
"""The IMEX CA (imex-tls component): signs only the nodes' IMEX certificates (the domain
controller's signer reads it)."""
NATS_AUTH_ISSUER_SECRET = "cdo-nats-auth-issuer"
NATS_AUTH_USER = "nats-auth"
"""The NATS authenticator's own (static) user, one of the server's auth_users."""

CA_LIFETIME = dt.timedelta(days=3650)
LEAF_LIFETIME = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)
MANAGER = "cdo-bootstrap"
LABELS = {"app.kubernetes.io/part-of": "cdo", "app.kubernetes.io/managed-by": MANAGER}


class ServingCertificate(msgspec.Struct, frozen=True, kw_only=True):
    """A certificate the API server checks when it calls one of cdo's webhooks: issued for the
    Service it dials (``<service>.<namespace>.svc``), and its CA written where the API server
    reads it. A new webhook Service is one more entry of :data:`SERVING_CERTIFICATES` (and its
    Secret, configurations and CRDs in the Role and ClusterRole ``cdo-bootstrap``, and a
    Certificate in components/cert-manager)."""

    secret: str
    """The Secret (``kubernetes.io/tls``: ``tls.crt``, ``tls.key``, ``ca.crt``)."""
    service: str
    """The Service in cdo's namespace the API server dials."""
    webhook_configurations: tuple[str, ...] = ()
    """MutatingWebhookConfigurations whose every webhook's caBundle is this CA."""
    validating_webhook_configurations: tuple[str, ...] = ()
    """ValidatingWebhookConfigurations whose every webhook's caBundle is this CA."""
    conversion_crds: tuple[str, ...] = ()
    """CustomResourceDefinitions whose conversion webhook's caBundle is this CA."""


SERVING_CERTIFICATES: tuple[ServingCertificate, ...] = (
    ServingCertificate(
        secret=WEBHOOK_SECRET,
        service=WEBHOOK_SERVICE,
        webhook_configurations=(WEBHOOK_CONFIGURATION,),
        validating_webhook_configurations=(WEBHOOK_CONFIGURATION,),
        conversion_crds=(CONVERSION_CRD,),
    ),
)


class BootstrapSettings(Settings, frozen=True, kw_only=True):
    namespace: Annotated[str, Meta(description="cdo's namespace (downward API).")] = ""
    kubeconfig: Annotated[str, Meta(description="Kubeconfig path; empty: in-cluster.")] = ""
    certificates: Annotated[
        bool, Meta(description="Issue certificates (false when cert-manager does).")
    ] = True
    tls_certs: Annotated[bool, Meta(description="Also issue the NATS certificate.")] = False
    imex_ca: Annotated[
        bool, Meta(description="Also make the IMEX CA that signs the nodes' IMEX certificates.")
    ] = False
    nats_users: Annotated[str, Meta(description="NATS users, comma separated.")] = (
        "nats-bootstrap,domain-controller,clique-allocator,imex-agent,health-monitor,reader"
    )
    nats_auth_callout: Annotated[
        bool, Meta(description="Make the auth callout's issuer key and its user's password.")
    ] = False


class _Secret(msgspec.Struct, kw_only=True):
    data: dict[str, str] = {}


# -- certificates (pure) ---------------------------------------------------------------------


class KeyPair(msgspec.Struct, frozen=True, kw_only=True):
    """A certificate and its key, PEM."""

    cert: bytes
    key: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_ca(*, now: dt.datetime, common_name: str = "cdo-ca") -> KeyPair:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key))


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(ca: KeyPair, *, names: Sequence[str], client: bool, now: dt.datetime) -> KeyPair:
    """A leaf certificate for ``names`` (server auth; also client auth when ``client``)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"the key in Secret {CA_SECRET} is not an EC key")
    key = _new_key()
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, *([ExtendedKeyUsageOID.CLIENT_AUTH] * client)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + LEAF_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key))


def still_good(
    pair: KeyPair, *, ca: KeyPair, names: Sequence[str], now: dt.datetime, is_ca: bool = False
) -> bool:
    """True when ``pair`` was signed by ``ca``, names exactly ``names`` and is not expiring."""
    try:
        cert = x509.load_pem_x509_certificate(pair.cert)
        ca_cert = x509.load_pem_x509_certificate(ca.cert)
        key = serialization.load_pem_private_key(pair.key, password=None)
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    if key.public_key() != cert.public_key():
        return False
    if cert.not_valid_after_utc - now < (RENEW_BEFORE if not is_ca else LEAF_LIFETIME):
        return False
    if is_ca:
        return True
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return sorted(str(n.value) for n in sans) == sorted(names)


def service_names(service: str, namespace: str) -> list[str]:
    """The names the API server dials a Service in ``namespace`` by."""
    name = f"{service}.{namespace}.svc"
    return [name, f"{name}.cluster.local"]


def nats_names(namespace: str) -> list[str]:
    service = f"{NATS_SERVICE}.{namespace}"
    headless = f"{NATS_HEADLESS_SERVICE}.{namespace}.svc"
    return [
        f"{service}.svc",
        NATS_SERVICE,
        service,
        f"{service}.svc.cluster.local",
        f"*.{headless}",
        f"*.{headless}.cluster.local",
    ]


def new_issuer() -> dict[str, bytes]:
    """A fresh account nkey: its seed and its public key."""
    seed = nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_ACCOUNT)
    public: bytes = nkeys.from_seed(bytearray(seed)).public_key
    return {"seed": bytes(seed), "public": public}


def issuer_still_good(data: Mapping[str, bytes]) -> bool:
    """True when ``data`` holds an account seed and the public key that belongs to it."""
    try:
        keys = nkeys.from_seed(bytearray(data.get("seed", b"")))
    except (nkeys.NkeysError, ValueError, IndexError):
        return False
    public: bytes = keys.public_key
    return public.startswith(b"A") and data.get("public") == public


# -- the API side ----------------------------------------------------------------------------


def _client_configs(obj: Mapping[str, Any]) -> list[tuple[str, str, Any, Mapping[str, Any]]]:
    """Each webhook clientConfig of ``obj`` (every webhook of a webhook configuration, the
    conversion webhook of a CRD): its path, the path and value that identify its place, and
    the clientConfig itself."""
    places: list[tuple[str, str, Any, Mapping[str, Any]]] = []
    for index, webhook in enumerate(obj.get("webhooks") or ()):
        places.append(
            (
                f"/webhooks/{index}/clientConfig",
                f"/webhooks/{index}/name",
                webhook.get("name"),
                webhook.get("clientConfig") or {},
            )
        )
    conversion = (obj.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") == "Webhook":
        places.append(
            (
                "/spec/conversion/webhook/clientConfig",
                "/spec/conversion/strategy",
                "Webhook",
                (conversion.get("webhook") or {}).get("clientConfig") or {},
            )
        )
    return places


def ca_bundle_patch(obj: Mapping[str, Any], bundle: str) -> list[dict[str, Any]]:
    """A JSON patch writing ``bundle`` into each webhook clientConfig of ``obj`` that lacks it.
    Each addition is guarded by a ``test`` of what identifies its place, so a concurrent change
    fails the patch instead of landing elsewhere."""
    patch: list[dict[str, Any]] = []
    for path, guard, value, client in _client_configs(obj):
        if client.get("caBundle") == bundle:
            continue
        patch.append({"op": "test", "path": guard, "value": value})
        patch.append({"op": "add", "path": f"{path}/caBundle", "value": bundle})
    return patch


def _bundle_patch(raw: bytes | None, what: str, bundle: str) -> list[dict[str, Any]]:
    if raw is None:
        raise ConfigError(f"{what} not found")
    found: dict[str, Any] = msgspec.json.decode(raw)
    if not _client_configs(found):
        raise ConfigError(f"{what} has no webhook to trust the CA (a conversion webhook for a CRD)")
    return ca_bundle_patch(found, bundle)


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _unb64(value: str) -> bytes:
    return base64.b64decode(value)


class Bootstrap:
    def __init__(self, client: KubeClient, *, settings: BootstrapSettings) -> None:
        self._client = client
        self._settings = settings
        self._namespace = settings.namespace

    async def _secret(self, name: str) -> dict[str, bytes] | None:
        raw = await self._client.get_or_none(SECRETS, name, namespace=self._namespace)
        if raw is None:
            return None
        data = msgspec.json.decode(raw, type=_Secret).data
        return {key: _unb64(value) for key, value in data.items()}

    async def _write_secret(
        self, name: str, data: Mapping[str, bytes], *, kind: str, exists: bool
    ) -> None:
        encoded = {key: _b64(value) for key, value in data.items()}
        if exists:
            await self._client.patch(
                SECRETS,
                name,
                {"metadata": {"labels": LABELS}, "data": encoded},
                namespace=self._namespace,
                field_manager=MANAGER,
            )
            log.info("secret %s updated", name)
            return
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": self._namespace, "labels": LABELS},
            "type": kind,
            "data": encoded,
        }
        await self._client.create(SECRETS, body, namespace=self._namespace)
        log.info("secret %s created", name)

    async def nats_users(self) -> None:
        users = [u.strip() for u in self._settings.nats_users.split(",") if u.strip()]
        if self._settings.nats_auth_callout and NATS_AUTH_USER not in users:
            users.append(NATS_AUTH_USER)
        current = await self._secret(NATS_USERS_SECRET)
        data = dict(current or {})
        missing = [user for user in users if not data.get(user)]
        if not missing:
            return
        for user in missing:
            # A leading letter: nats-server reads the password as a config value, and one
            # that starts with digits and a dash is parsed as a date and refused.
            data[user] = ("p" + secrets.token_urlsafe(32)).encode()
        await self._write_secret(NATS_USERS_SECRET, data, kind="Opaque", exists=current is not None)

    async def nats_auth_issuer(self) -> None:
        """The issuer account key; kept while it is whole (a new one would refuse every
        client until the servers and the authenticator restart with it)."""
        current = await self._secret(NATS_AUTH_ISSUER_SECRET)
        if current is not None and issuer_still_good(current):
            return
        await self._write_secret(
            NATS_AUTH_ISSUER_SECRET, new_issuer(), kind="Opaque", exists=current is not None
        )

    async def ca(self, now: dt.datetime, *, secret: str = CA_SECRET) -> KeyPair:
        current = await self._secret(secret)
        if current is not None and "tls.crt" in current and "tls.key" in current:
            pair = KeyPair(cert=current["tls.crt"], key=current["tls.key"])
            if still_good(pair, ca=pair, names=(), now=now, is_ca=True):
                return pair
        pair = new_ca(now=now)
        await self._write_secret(
            secret,
            {"tls.crt": pair.cert, "tls.key": pair.key},
            kind="kubernetes.io/tls",
            exists=current is not None,
        )
        return pair

    async def leaf(
        self, name: str, *, ca: KeyPair, names: Sequence[str], client: bool, now: dt.datetime
    ) -> bool:
        """Issue the Secret's certificate unless it is still good; True when it was issued again
        (it existed before)."""
        current = await self._secret(name)
        if current is not None and current.get("ca.crt") == ca.cert:
            pair = KeyPair(cert=current.get("tls.crt", b""), key=current.get("tls.key", b""))
            if still_good(pair, ca=ca, names=names, now=now):
                return False
        pair = issue(ca, names=names, client=client, now=now)
        await self._write_secret(
            name,
            {"tls.crt": pair.cert, "tls.key": pair.key, "ca.crt": ca.cert},
            kind="kubernetes.io/tls",
            exists=current is not None,
        )
        return current is not None

    async def serving_certificate(
        self, certificate: ServingCertificate, *, ca: KeyPair, now: dt.datetime
    ) -> None:
        """The webhook's certificate, and its CA where the API server reads it."""
        names = service_names(certificate.service, self._namespace)
        await self.leaf(certificate.secret, ca=ca, names=names, client=False, now=now)
        bundle = _b64(ca.cert)
        for configuration in certificate.webhook_configurations:
            await self.webhook_ca_bundle(configuration, bundle)
        for configuration in certificate.validating_webhook_configurations:
            await self.validating_webhook_ca_bundle(configuration, bundle)
        for crd in certificate.conversion_crds:
            await self.conversion_ca_bundle(crd, bundle)

    # One method per kind: each names the resource it reads and patches, so the RBAC test can
    # derive the bootstrap's role from the code (tests/integration/deploy/access.py).
    async def webhook_ca_bundle(self, name: str, bundle: str) -> None:
        """The CA in every webhook of a MutatingWebhookConfiguration that lacks it."""
        raw = await self._client.get_or_none(MUTATING_WEBHOOKS, name)
        patch = _bundle_patch(raw, f"{MUTATING_WEBHOOKS.kind} {name}", bundle)
        if patch:
            await self._client.patch(
                MUTATING_WEBHOOKS, name, patch, patch_type="json", field_manager=MANAGER
            )
            log.info("caBundle of %s written", name)

    async def validating_webhook_ca_bundle(self, name: str, bundle: str) -> None:
        """The CA in every webhook of a ValidatingWebhookConfiguration that lacks it."""
        raw = await self._client.get_or_none(VALIDATING_WEBHOOKS, name)
        patch = _bundle_patch(raw, f"{VALIDATING_WEBHOOKS.kind} {name}", bundle)
        if patch:
            await self._client.patch(
                VALIDATING_WEBHOOKS, name, patch, patch_type="json", field_manager=MANAGER
            )
            log.info("caBundle of %s written", name)

    async def conversion_ca_bundle(self, name: str, bundle: str) -> None:
        """The CA in a CustomResourceDefinition's conversion webhook, if it lacks it."""
        raw = await self._client.get_or_none(CRDS, name)
        patch = _bundle_patch(raw, f"{CRDS.kind} {name}", bundle)
        if patch:
            await self._client.patch(CRDS, name, patch, patch_type="json", field_manager=MANAGER)
            log.info("conversion caBundle of %s written", name)

    async def restart_nats(self, now: dt.datetime) -> None:
        """Roll the NATS servers so that they read their new certificate (nats-server reads it
        only at start), as ``kubectl rollout restart`` does; nothing when there is no
        StatefulSet yet (its pods will read the new certificate when they start)."""
        if (
            await self._client.get_or_none(
                STATEFUL_SETS, NATS_STATEFULSET, namespace=self._namespace
            )
            is None
        ):
            return
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        await self._client.patch(
            STATEFUL_SETS,
            NATS_STATEFULSET,
            {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}},
            namespace=self._namespace,
            field_manager=MANAGER,
        )
        log.info("statefulset %s restarted: its certificate was issued again", NATS_STATEFULSET)

    async def run(self, now: dt.datetime | None = None) -> None:
        now = now or dt.datetime.now(dt.UTC)
        await self.nats_users()
        if self._settings.nats_auth_callout:
            await self.nats_auth_issuer()
        if not self._settings.certificates:
            return
        ca = await self.ca(now)
        for certificate in SERVING_CERTIFICATES:
            await self.serving_certificate(certificate, ca=ca, now=now)
        if self._settings.tls_certs:
            nats = nats_names(self._namespace)
            if await self.leaf(NATS_TLS_SECRET, ca=ca, names=nats, client=True, now=now):
                await self.restart_nats(now)
        if self._settings.imex_ca:
            await self.ca(now, secret=IMEX_CA_SECRET)


async def bootstrap(settings: BootstrapSettings, *, now: dt.datetime | None = None) -> None:
    if not settings.namespace:
        raise ConfigError("CDO_BOOTSTRAP_NAMESPACE is required")
    client = await KubeClient.connect(kubeconfig=settings.kubeconfig or None)
    try:
        await Bootstrap(client, settings=settings).run(now)
    finally:
        await client.close()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        settings = load_settings(BootstrapSettings, prefix="CDO_BOOTSTRAP_")
        asyncio.run(bootstrap(settings))
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    except KubeApiError as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
