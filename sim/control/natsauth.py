"""``cdo sim up --nats-auth``: NATS identities from ServiceAccount tokens on the simulated system,
as the nats-auth-callout component deploys them (docs/deploy.md).

What the component's objects and the cdo-bootstrap Job do on a real cluster, done here:

- :func:`callout_keys`: the issuer account's nkey (seed file, mode 0600) and the authenticator's
  password, which nats-server reads from its environment (``NATS_AUTH_ISSUER``,
  ``NATS_PASSWORD_NATS_AUTH``) for the component's ``auth.conf``;
- :func:`prepare_identities`: the ServiceAccounts and roles of deploy/kustomize/base rendered
  with the component (so the authenticator's ServiceAccount ``cdo-nats-auth`` and its role come
  from deploy/), applied with the admin's client; a kubeconfig with a ``cdo-nats-auth`` token for
  the authenticator; a reader ServiceAccount (:data:`READER`) and its NATS token file, for what
  reads the events from outside (``cdo events``, ``cdo status``, tests);
- :func:`authenticator_env`: the environment of ``python -m services.nats_auth``, the literal
  values of the rendered Deployment's container with this machine's paths and ports.

Tokens live a year (:data:`sim.identities.TOKEN_EXPIRATION_S`) and are not rewritten: the
authenticator's users last at most an hour, and a client whose user expires reconnects with
the same token, still valid.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.nats_auth.nkeyjwt import ACCOUNT, Signer, new_seed
from shared.kube.client import KubeClient
from sim import identities
from sim.control.state import IDENTITIES_DIR

AUTH_CONF = identities.DEPLOY_COMPONENTS / identities.NATS_AUTH_COMPONENT / "auth.conf"
"""The component's server configuration, used as it is (the command line sets the store)."""
AUTHENTICATOR = "cdo-nats-auth"
"""The authenticator's ServiceAccount and Deployment (components/nats-auth-callout)."""
READER_NAMESPACE = "default"
READER_ACCOUNT = "cdo-reader"
READER = f"{READER_NAMESPACE}/{READER_ACCOUNT}"
"""The reader identity of the simulated system (``CDO_NATS_AUTH_READERS``): subscribes and
consumes, publishes nothing."""
KEYS_DIR = "nats-auth"


@dataclass(frozen=True)
class CalloutKeys:
    """The issuer key (its seed in a file) and the authenticator's password."""

    seed_file: Path
    issuer: str
    password: str

    def server_env(self) -> dict[str, str]:
        """What the component's auth.conf reads from the server's environment."""
        return {"NATS_AUTH_ISSUER": self.issuer, "NATS_PASSWORD_NATS_AUTH": self.password}


@dataclass(frozen=True)
class AuthIdentities:
    """The files :func:`prepare_identities` wrote and the rendered authenticator Deployment."""

    kubeconfig: Path
    """The authenticator's, with a token of ``cdo-nats-auth`` for the API server."""
    reader_token_file: Path
    deployment: dict[str, Any]


def callout_keys(state_dir: Path) -> CalloutKeys:
    """A fresh issuer seed in ``<state dir>/nats-auth/issuer.seed`` and a random password."""
    seed = new_seed(ACCOUNT)
    path = state_dir / KEYS_DIR / "issuer.seed"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(seed)
    return CalloutKeys(
        seed_file=path,
        issuer=Signer.from_seed(seed).public_key,
        # A leading letter: nats-server reads the variable as a config value, and one that
        # starts with digits and a dash is parsed as a date and refused.
        password="p" + secrets.token_urlsafe(24),
    )


def _deployment(objs: list[dict[str, Any]]) -> dict[str, Any]:
    for obj in objs:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == AUTHENTICATOR:
            return obj
    raise identities.IdentityError(
        f"{identities.NATS_AUTH_COMPONENT} renders no Deployment {AUTHENTICATOR}"
    )


async def prepare_identities(*, admin_kubeconfig: Path, state_dir: Path) -> AuthIdentities:
    """Apply the rendered identities (base and component) and the reader's ServiceAccount;
    write the authenticator's kubeconfig and the reader's NATS token file."""
    rendered = await asyncio.to_thread(identities.render_with, (identities.NATS_AUTH_COMPONENT,))
    reader = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": READER_ACCOUNT, "namespace": READER_NAMESPACE},
    }
    directory = state_dir / IDENTITIES_DIR
    client = await KubeClient.connect(kubeconfig=str(admin_kubeconfig))
    try:
        await identities.install(client, [reader, *identities.identity_objects(rendered)])
        kubeconfig = await identities.issue_kubeconfig(
            client,
            admin_kubeconfig=admin_kubeconfig,
            account=AUTHENTICATOR,
            path=directory / f"{AUTHENTICATOR}.kubeconfig",
        )
        reader_token = await identities.write_token_file(
            client,
            READER_ACCOUNT,
            namespace=READER_NAMESPACE,
            path=identities.nats_token_path(directory, READER_ACCOUNT),
        )
    finally:
        await client.close()
    return AuthIdentities(
        kubeconfig=kubeconfig, reader_token_file=reader_token, deployment=_deployment(rendered)
    )


def authenticator_env(
    prepared: AuthIdentities, keys: CalloutKeys, *, nats_url: str, http_port: int
) -> dict[str, str]:
    """The rendered container's literal settings, with this machine's files and ports, the
    namespace and the password (which the Deployment takes from the downward API and a
    Secret), and the simulated system's reader."""
    container = prepared.deployment["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    env.update(
        CDO_NATS_URL=nats_url,
        CDO_NATS_PASSWORD=keys.password,
        CDO_NATS_TOKEN_FILE="",
        CDO_INSTANCE=f"{AUTHENTICATOR}-0",
        CDO_HTTP_HOST="127.0.0.1",
        CDO_HTTP_PORT=str(http_port),
        CDO_NATS_AUTH_NAMESPACE=identities.NAMESPACE,
        CDO_NATS_AUTH_KUBECONFIG=str(prepared.kubeconfig),
        CDO_NATS_AUTH_ISSUER_SEED_FILE=str(keys.seed_file),
        CDO_NATS_AUTH_READERS=READER,
    )
    return env
