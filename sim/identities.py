"""cdo's identities on a simulated cluster: the ServiceAccounts, roles and admission policies
(node restriction, one pod per channel claim, the pod gate) deploy/ ships, and the
ServiceAccount tokens each service runs with.

    objs = identity_objects(render_base())          # kubectl kustomize deploy/kustomize/base
    await install(admin, objs)                      # what kubectl apply -k does for them
    path = await issue_kubeconfig(admin, admin_kubeconfig=..., account=DOMAIN_CONTROLLER_SA,
                                  path=state_dir / "identities" / "domain-controller.kubeconfig")

One source: the objects come from rendering the same kustomize base a real cluster is installed
from, and only the kinds in :data:`IDENTITY_KINDS` are applied (the workloads themselves run as
processes of the simulator). Tokens come from the TokenRequest API, as the kubelet gets the
projected tokens of a pod. A per-node service's token is bound to its Node (``boundObjectRef``
kind Node), so the API server puts ``authentication.kubernetes.io/node-name`` in its user's
extra, as it does for a DaemonSet pod's token.

Lifetime: every token asks for :data:`TOKEN_EXPIRATION_S` (a year) and is not refreshed (the
services load their kubeconfig once). A node-bound token also ends with its Node object; the
node host asks for a fresh one at every start of a node's services.

NATS identities (``cdo sim up --nats-auth``): :func:`write_token_file` writes a token of the
``nats`` audience for ``CDO_NATS_TOKEN_FILE``, and :func:`render_with` renders the base with
components (the nats-auth-callout component adds the authenticator's ServiceAccount and role).
Those tokens live a year too: the authenticator's users last at most an hour, and a client
whose user expires reconnects with the same, still valid token.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import yaml

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import NAMESPACES, Resource, core

log = logging.getLogger("cdo.sim.identities")

ROOT = Path(__file__).resolve().parents[1]
DEPLOY_BASE = ROOT / "deploy" / "kustomize" / "base"
DEPLOY_COMPONENTS = ROOT / "deploy" / "kustomize" / "components"
NATS_AUTH_COMPONENT = "nats-auth-callout"
NATS_AUDIENCE = "nats"
"""The audience of the tokens cdo's services connect to NATS with (the component's)."""
NATS_TOKENS_DIR = "nats"
"""Under the identities directory: ``<account>.token``, ``<account>/<node>.token``."""
NAMESPACE = "cdo-system"

RBAC_GROUP = "rbac.authorization.k8s.io"
IDENTITY_KINDS: dict[str, Resource] = {
    "ServiceAccount": core("serviceaccounts", "ServiceAccount"),
    **{
        kind: Resource(
            group=RBAC_GROUP,
            version="v1",
            plural=kind.lower() + "s",
            kind=kind,
            namespaced=not kind.startswith("Cluster"),
        )
        for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    },
    # The admission policies of the base: node restriction (what keeps each node's services to
    # their own node's objects, keyed on their tokens' node claim), one pod per channel claim,
    # and the pod gate (a ComputeDomain's pod only with the allocator's gate).
    **{
        kind: Resource(
            group="admissionregistration.k8s.io",
            version="v1",
            plural=plural,
            kind=kind,
            namespaced=False,
        )
        for kind, plural in (
            ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
            ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"),
        )
    },
}
"""The kinds of the rendered base that are applied to the simulated cluster, in that order (an
account before the bindings naming it, a policy before its binding). The one list: add a kind
here to apply it too."""

DOMAIN_CONTROLLER_SA = "cdo-domain-controller"
CLIQUE_ALLOCATOR_SA = "cdo-clique-allocator"
IMEX_AGENT_SA = "cdo-imex-agent"
HEALTH_MONITOR_SA = "cdo-health-monitor"
SERVICE_ACCOUNTS = (DOMAIN_CONTROLLER_SA, CLIQUE_ALLOCATOR_SA, IMEX_AGENT_SA, HEALTH_MONITOR_SA)

TOKEN_EXPIRATION_S = 365 * 24 * 3600
"""A year: longer than any simulated run, so no service's token expires under it."""
NODE_RETRY_S = 0.5
"""How often a node-bound token is asked for again while its Node is not registered yet."""

Manifest = dict[str, Any]


class IdentityError(Exception):
    """The identities cannot be rendered (no kubectl, no deploy/ directory, a bad render)."""


def kubectl_binary() -> str:
    """The kubectl next to this Python (the dev dependencies install one), else on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise IdentityError(
            "kubectl is needed to render deploy/kustomize/base (install the dev dependencies: "
            "./task --list)"
        )
    return found


def render_base(base: Path = DEPLOY_BASE) -> list[Manifest]:
    """``kubectl kustomize <base>``, parsed."""
    if not (base / "kustomization.yaml").exists():
        raise IdentityError(f"{base}: no kustomization.yaml (cdo's deploy/ directory is needed)")
    result = subprocess.run(
        [kubectl_binary(), "kustomize", str(base)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise IdentityError(f"kubectl kustomize {base} failed: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_with(components: Sequence[str], *, base: Path = DEPLOY_BASE) -> list[Manifest]:
    """The base with deploy/'s ``components``, through an overlay in a temporary directory
    (what an overlay listing them renders), parsed."""
    for name in components:
        if not (DEPLOY_COMPONENTS / name / "kustomization.yaml").exists():
            raise IdentityError(f"no component {name} in {DEPLOY_COMPONENTS}")
    with tempfile.TemporaryDirectory(prefix="cdo-render-") as directory:
        listed = "".join(
            f"- {os.path.relpath(DEPLOY_COMPONENTS / name, directory)}\n" for name in components
        )
        Path(directory, "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\n"
            "kind: Kustomization\n"
            f"namespace: {NAMESPACE}\n"
            f"resources:\n- {os.path.relpath(base, directory)}\n"
            f"components:\n{listed}"
        )
        return render_base(Path(directory))


def identity_objects(objs: Iterable[Manifest]) -> list[Manifest]:
    """The objects of :data:`IDENTITY_KINDS`, in the order of that list."""
    order = list(IDENTITY_KINDS)
    chosen = [obj for obj in objs if obj.get("kind") in IDENTITY_KINDS]
    return sorted(chosen, key=lambda obj: order.index(obj["kind"]))


async def rendered_identities(
    base: Path = DEPLOY_BASE, *, components: Sequence[str] = ()
) -> list[Manifest]:
    """:func:`render_base` (with ``components``: :func:`render_with`) filtered by
    :func:`identity_objects` (kubectl runs in a thread)."""
    if components:
        return identity_objects(await asyncio.to_thread(render_with, components, base=base))
    return identity_objects(await asyncio.to_thread(render_base, base))


async def _ensure_namespace(client: KubeClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        await client.create(NAMESPACES, body)
    except KubeApiError as exc:
        if not exc.already_exists:
            raise


async def _apply(client: KubeClient, obj: Manifest) -> None:
    """Create ``obj``, or replace what is there under its name (its resourceVersion kept)."""
    resource = IDENTITY_KINDS[obj["kind"]]
    name = obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace", "") if resource.namespaced else ""
    try:
        await client.create(resource, obj, namespace=namespace)
        return
    except KubeApiError as exc:
        if not exc.already_exists:
            raise
    current = msgspec.json.decode(await client.get(resource, name, namespace=namespace))
    metadata = {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
    await client.replace(resource, name, {**obj, "metadata": metadata}, namespace=namespace)


async def install(client: KubeClient, objs: Sequence[Manifest]) -> None:
    """Apply ``objs`` (from :func:`identity_objects`) with ``client``, an admin's: their
    namespaces first, then each object created or replaced. Safe to run again."""
    namespaces = {obj["metadata"]["namespace"] for obj in objs if obj["metadata"].get("namespace")}
    for namespace in sorted(namespaces):
        await _ensure_namespace(client, namespace)
    for obj in objs:
        await _apply(client, obj)
    log.info("installed cdo's identities", extra={"objects": len(objs)})


async def request_token(
    client: KubeClient,
    account: str,
    *,
    namespace: str = NAMESPACE,
    node: str | None = None,
    expiration_s: int = TOKEN_EXPIRATION_S,
    audience: str = "",
) -> str:
    """A token of ServiceAccount ``account`` from the TokenRequest API, for ``audience`` (""
    is the API server's own); bound to Node ``node`` when given (raises the API's 404 while
    that Node does not exist)."""
    spec: dict[str, Any] = {"expirationSeconds": expiration_s}
    if audience:
        spec["audiences"] = [audience]
    if node is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Node", "name": node}
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    raw = await client.create(
        IDENTITY_KINDS["ServiceAccount"],
        body,
        namespace=namespace,
        name=account,
        subresource="token",
    )
    token: str = msgspec.json.decode(raw)["status"]["token"]
    return token


def kubeconfig_for(admin: Manifest, *, user: str, token: str) -> Manifest:
    """The admin's kubeconfig (same server, same CA) with ``user`` and its token instead."""
    context = next(
        entry for entry in admin["contexts"] if entry["name"] == admin["current-context"]
    )
    cluster_name = context["context"]["cluster"]
    cluster = next(entry for entry in admin["clusters"] if entry["name"] == cluster_name)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": user,
                "context": {
                    "cluster": cluster["name"],
                    "user": user,
                    "namespace": context["context"].get("namespace", "default"),
                },
            }
        ],
        "current-context": user,
        "preferences": {},
    }


async def issue_kubeconfig(
    client: KubeClient,
    *,
    admin_kubeconfig: Path,
    account: str,
    path: Path,
    node: str | None = None,
) -> Path:
    """Write to ``path`` (mode 0600) a kubeconfig that acts as ServiceAccount ``account`` of
    cdo's namespace, its token bound to ``node`` when given."""
    token = await request_token(client, account, node=node)
    user = account if node is None else f"{account}@{node}"
    return write_kubeconfig(path, admin_kubeconfig=admin_kubeconfig, user=user, token=token)


def write_kubeconfig(path: Path, *, admin_kubeconfig: Path, user: str, token: str) -> Path:
    """:func:`kubeconfig_for` the admin's kubeconfig file, written to ``path`` (mode 0600)."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    config = kubeconfig_for(admin, user=user, token=token)
    return _write_secret_file(path, yaml.safe_dump(config, sort_keys=False))


def _write_secret_file(path: Path, text: str) -> Path:
    """``text`` to ``path``, mode 0600, whole or not at all (a reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.touch(mode=0o600)
    temporary.write_text(text)
    temporary.replace(path)
    return path


def nats_token_path(directory: Path, account: str, node: str | None = None) -> Path:
    """Where a service's NATS token file lives under the identities ``directory``."""
    nats = directory / NATS_TOKENS_DIR
    return nats / f"{account}.token" if node is None else nats / account / f"{node}.token"


async def write_token_file(
    client: KubeClient,
    account: str,
    *,
    path: Path,
    namespace: str = NAMESPACE,
    node: str | None = None,
) -> Path:
    """A token of ``account`` for NATS (audience ``nats``), bound to Node ``node`` when given,
    in ``path`` (mode 0600): what ``CDO_NATS_TOKEN_FILE`` names."""
    token = await request_token(
        client, account, namespace=namespace, node=node, audience=NATS_AUDIENCE
    )
    return await asyncio.to_thread(_write_secret_file, path, token)


class NodeIdentities:
    """Kubernetes clients that act as a per-node service's ServiceAccount, bound to one node.

    ``client(account, node)`` asks for a token bound to ``node`` (waiting while the Node is
    not registered), writes ``<directory>/<account>/<node>.kubeconfig`` and connects with it.
    ``admin`` (the node host's own client, standing for the kubelet) makes the TokenRequests.
    With ``nats``, each service also connects to NATS with a token of its own bound to the
    node (``nats_token_file(account, node)``, ``<directory>/nats/<account>/<node>.token``).
    """

    def __init__(
        self, admin: KubeClient, *, admin_kubeconfig: Path, directory: Path, nats: bool = False
    ) -> None:
        self.admin = admin
        self.admin_kubeconfig = admin_kubeconfig
        self.directory = directory
        self.nats = nats

    def kubeconfig(self, account: str, node: str) -> Path:
        return self.directory / account / f"{node}.kubeconfig"

    async def client(self, account: str, node: str) -> KubeClient:
        path = self.kubeconfig(account, node)
        await self._bound(
            node,
            lambda: issue_kubeconfig(
                self.admin,
                admin_kubeconfig=self.admin_kubeconfig,
                account=account,
                path=path,
                node=node,
            ),
        )
        return await KubeClient.connect(kubeconfig=path)

    async def nats_token_file(self, account: str, node: str) -> Path:
        """A NATS token of ``account`` bound to ``node`` in a file (``CDO_NATS_TOKEN_FILE``),
        issued afresh like :meth:`client`'s."""
        path = nats_token_path(self.directory, account, node)
        return await self._bound(
            node, lambda: write_token_file(self.admin, account, path=path, node=node)
        )

    async def _bound(self, node: str, issue: Callable[[], Awaitable[Path]]) -> Path:
        """``issue()``, again every :data:`NODE_RETRY_S` while ``node`` is not registered."""
        while True:
            try:
                return await issue()
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
                log.info("no Node to bind a token to yet", extra={"node": node})
                await asyncio.sleep(NODE_RETRY_S)
