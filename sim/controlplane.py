"""``python -m sim.controlplane``: cdo's cluster-wide services on a simulated cluster.

    python -m sim up &                                   # writes <state dir>/cluster.json
    CDO_NATS_URL=nats://127.0.0.1:4222 python -m sim.controlplane [--state-dir DIR]

What ``kubectl apply -k deploy/kustomize/overlays/dev`` and the kubelet do for the domain
controller and the clique allocator on a real cluster, done for the simulated one:

- installs the CRDs and the ``cdo-system`` namespace (where the leader-election Leases live); the
  ComputeDomain CRD's conversion webhook is the allocator's ``/convert``, by URL on 127.0.0.1
  with the CA below, so ``v1beta1`` requests work once the allocator serves;
- applies the ServiceAccounts, Roles and bindings and the admission policies (the pod gate
  among them) rendered from ``deploy/kustomize/base`` (:mod:`sim.identities`) and writes each
  service a kubeconfig of its own,
  ``<state dir>/identities/<service account>.kubeconfig``, with a token of its ServiceAccount
  from the TokenRequest API: each service acts as its own identity, with exactly the RBAC that
  deploy/ ships; with ``--nats-auth`` each also gets a NATS token of its ServiceAccount
  (audience ``nats``, ``<state dir>/identities/nats/<service account>.token``) and connects
  with it (``CDO_NATS_TOKEN_FILE``) instead of a NATS user;
- issues the allocator's webhook serving certificate from a throwaway CA and registers the
  MutatingWebhookConfiguration (the pod webhook) and the ValidatingWebhookConfiguration (the
  channel allocation webhook) with that CA, reaching the allocator by URL on 127.0.0.1;
- runs ``python -m services.domain_controller`` and ``python -m services.clique_allocator`` as
  child processes (each with its log under ``<state dir>/logs/``) and starts a child that exits
  again after a backoff, as the kubelet restarts a crashed container — a service killed in a
  chaos test, or one that exits on losing its lease, comes back;
- writes ``<state dir>/controlplane.json`` (its pid, each service's pid, probe URL and restart
  count) whenever that changes, and removes it on exit.

SIGTERM or SIGINT stops both services (SIGTERM, then SIGKILL after a grace period). The children
die with this process even when it is SIGKILLed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import logging
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from services.clique_allocator.webhook.configuration import (
    DEFAULT_NAME,
    allocation_webhook_configuration,
    webhook_configuration,
)
from shared.crds import install_crds
from shared.crds.definitions import compute_domain_crd, conversion, placement_crd
from shared.crds.names import DRIVER_NAME
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import NAMESPACES
from sim import identities
from sim.childproc import die_with_parent
from sim.control.state import IDENTITIES_DIR
from sim.kubeapi.admission.certificates import CertificateAuthority
from sim.natsserver import free_port

log = logging.getLogger("cdo.sim.controlplane")

STATE_FILE = "controlplane.json"
CLUSTER_FILE = "cluster.json"
DEFAULT_STATE_DIR = Path(".cdo") / "sim"
SYSTEM_NAMESPACE = "cdo-system"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
DOMAIN_CONTROLLER = "domain-controller"
CLIQUE_ALLOCATOR = "clique-allocator"
STOP_GRACE_S = 15.0
RESTART_BACKOFF_INITIAL_S = 0.5
RESTART_BACKOFF_MAX_S = 10.0
RESTART_BACKOFF_RESET_S = 30.0
"""A child that ran this long before exiting starts again after the initial backoff."""

# Kubernetes' usual timing, as on a real cluster. The API emulator, one Python process on a
# shared two-core machine, stalls for seconds under load (GETs took up to 4.5 s during a
# bring-up, measured in docs/simulator.md): with a 3 s renew deadline both leaders stepped down
# and restarted in such a stall, about 10 s without an allocator (no placement, no webhook)
# each time. A restarted service takes its Lease back at once (same identity, CDO_INSTANCE), so
# only a frozen leader's Lease waits out the 15 s.
# The environment may still set them per service (e.g.
# CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_RENEW_DEADLINE_S).
LEADER_ELECTION = {
    "LEADER_ELECTION_LEASE_DURATION_S": "15",
    "LEADER_ELECTION_RENEW_DEADLINE_S": "10",
    "LEADER_ELECTION_RETRY_PERIOD_S": "2",
}


class ServiceState(msgspec.Struct, frozen=True, kw_only=True):
    pid: int
    probe_url: str
    restarts: int = 0
    started_at: float = 0.0


class ControlPlaneInfo(msgspec.Struct, frozen=True, kw_only=True):
    """``controlplane.json``: what runs, for the CLI, the demo and the tests."""

    pid: int
    ready: bool
    services: dict[str, ServiceState] = msgspec.field(default_factory=dict)
    webhook_url: str = ""


class _ClusterFile(msgspec.Struct, frozen=True, kw_only=True):
    kubeconfig: str


def read_info(state_dir: Path) -> ControlPlaneInfo | None:
    try:
        return msgspec.json.decode((state_dir / STATE_FILE).read_bytes(), type=ControlPlaneInfo)
    except FileNotFoundError:
        return None


def _write_info(state_dir: Path, info: ControlPlaneInfo) -> None:
    path = state_dir / STATE_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(msgspec.json.encode(info))
    temporary.replace(path)


@dataclass(frozen=True)
class ServiceSpec:
    """One child: its module, port and environment."""

    name: str
    module: str
    http_port: int
    env: Mapping[str, str]

    @property
    def probe_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def service_env(
    *,
    prefix: str,
    name: str,
    kubeconfig: str,
    http_port: int,
    extra: Mapping[str, str],
    nats_token_file: Path | None = None,
) -> dict[str, str]:
    """A service's environment: the runtime's CDO_* settings plus its own prefixed ones; with
    ``nats_token_file``, it connects to NATS with that token (no user, no password)."""
    own = {
        "KUBECONFIG": kubeconfig,
        "LEASE_NAMESPACE": SYSTEM_NAMESPACE,
        **{key: os.environ.get(prefix + key, value) for key, value in LEADER_ELECTION.items()},
        **extra,
    }
    nats = (
        {"CDO_NATS_TOKEN_FILE": str(nats_token_file), "CDO_NATS_USER": "", "CDO_NATS_PASSWORD": ""}
        if nats_token_file is not None
        else {}
    )
    return {
        "CDO_HTTP_HOST": "127.0.0.1",
        "CDO_HTTP_PORT": str(http_port),
        "CDO_INSTANCE": f"{name}-0",
        **nats,
        **{prefix + key: value for key, value in own.items()},
    }


def _ready(probe_url: str) -> bool:
    try:
        with urllib.request.urlopen(probe_url + "/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class _Child:
    spec: ServiceSpec
    log_path: Path
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    started_at: float = 0.0
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as sink:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                self.spec.module,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                env={**os.environ, **self.spec.env},
                preexec_fn=die_with_parent,
            )
        self.started_at = time.time()
        log.info("started %s (pid %d)", self.spec.name, self.process.pid)

    async def stop(self) -> None:
        self.stop_requested.set()
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except TimeoutError:
            log.warning("%s did not stop within %.0f s; killing it", self.spec.name, STOP_GRACE_S)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    def state(self) -> ServiceState:
        pid = self.process.pid if self.process is not None else 0
        return ServiceState(
            pid=pid,
            probe_url=self.spec.probe_url,
            restarts=self.restarts,
            started_at=self.started_at,
        )


def restart_delay(previous_s: float, ran_s: float) -> float:
    """The kubelet's crash-loop rule, in small: double each time, reset after a good run."""
    if ran_s >= RESTART_BACKOFF_RESET_S or previous_s <= 0:
        return RESTART_BACKOFF_INITIAL_S
    return min(previous_s * 2, RESTART_BACKOFF_MAX_S)


class ControlPlane:
    def __init__(self, state_dir: Path, kubeconfig: str, *, nats_auth: bool = False) -> None:
        self.state_dir = state_dir
        self.kubeconfig = kubeconfig
        """The admin's: CRDs, identities, the webhook's registration."""
        self.accounts = {
            DOMAIN_CONTROLLER: identities.DOMAIN_CONTROLLER_SA,
            CLIQUE_ALLOCATOR: identities.CLIQUE_ALLOCATOR_SA,
        }
        self.service_kubeconfigs = {
            name: state_dir / IDENTITIES_DIR / f"{account}.kubeconfig"
            for name, account in self.accounts.items()
        }
        self.nats_tokens = (
            {
                name: identities.nats_token_path(state_dir / IDENTITIES_DIR, account)
                for name, account in self.accounts.items()
            }
            if nats_auth
            else {}
        )
        """With NATS identities: each service's NATS token file (``CDO_NATS_TOKEN_FILE``)."""
        self.tls_dir = state_dir / "webhook-tls"
        self.webhook_port = free_port()
        self.ready = False
        logs = state_dir / "logs"
        controller_port, allocator_port = free_port(), free_port()
        self.children = {
            DOMAIN_CONTROLLER: _Child(
                ServiceSpec(
                    name=DOMAIN_CONTROLLER,
                    module="services.domain_controller",
                    http_port=controller_port,
                    env=service_env(
                        prefix="CDO_DOMAIN_CONTROLLER_",
                        name=DOMAIN_CONTROLLER,
                        kubeconfig=str(self.service_kubeconfigs[DOMAIN_CONTROLLER]),
                        nats_token_file=self.nats_tokens.get(DOMAIN_CONTROLLER),
                        http_port=controller_port,
                        extra={},
                    ),
                ),
                logs / f"{DOMAIN_CONTROLLER}.log",
            ),
            CLIQUE_ALLOCATOR: _Child(
                ServiceSpec(
                    name=CLIQUE_ALLOCATOR,
                    module="services.clique_allocator",
                    http_port=allocator_port,
                    env=service_env(
                        prefix="CDO_CLIQUE_ALLOCATOR_",
                        name=CLIQUE_ALLOCATOR,
                        kubeconfig=str(self.service_kubeconfigs[CLIQUE_ALLOCATOR]),
                        nats_token_file=self.nats_tokens.get(CLIQUE_ALLOCATOR),
                        http_port=allocator_port,
                        extra={
                            "WEBHOOK_HOST": "127.0.0.1",
                            "WEBHOOK_PORT": str(self.webhook_port),
                            "WEBHOOK_CERT_FILE": str(self.tls_dir / "tls.crt"),
                            "WEBHOOK_KEY_FILE": str(self.tls_dir / "tls.key"),
                        },
                    ),
                ),
                logs / f"{CLIQUE_ALLOCATOR}.log",
            ),
        }

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def publish(self) -> None:
        _write_info(
            self.state_dir,
            ControlPlaneInfo(
                pid=os.getpid(),
                ready=self.ready,
                services={name: child.state() for name, child in self.children.items()},
                webhook_url=self.webhook_url,
            ),
        )

    async def prepare(self) -> bytes:
        """CRDs, namespace, identities and the webhook certificate; the CA to register the
        webhook with."""
        ca_pem = self.issue_webhook_certificate()
        rendered = await identities.rendered_identities()
        client = await KubeClient.connect(kubeconfig=self.kubeconfig)
        try:
            webhook = conversion(url=self.webhook_url, ca_bundle=ca_pem)
            await install_crds(client, [compute_domain_crd(webhook=webhook), placement_crd()])
            with contextlib.suppress(KubeApiError):  # already there
                await client.create(
                    NAMESPACES,
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": SYSTEM_NAMESPACE},
                    },
                )
            await identities.install(client, rendered)
            for name, account in self.accounts.items():
                await identities.issue_kubeconfig(
                    client,
                    admin_kubeconfig=Path(self.kubeconfig),
                    account=account,
                    path=self.service_kubeconfigs[name],
                )
                if name in self.nats_tokens:
                    await identities.write_token_file(client, account, path=self.nats_tokens[name])
        finally:
            await client.close()
        return ca_pem

    def issue_webhook_certificate(self) -> bytes:
        """The allocator's serving certificate (its pod and conversion webhooks), from a
        throwaway CA; returns the CA. As long-lived as deploy/'s CA and certificates (ten years,
        one), so that cdo preflight judges it as a real installation's."""
        ca = CertificateAuthority("cdo-sim-webhook-ca", valid_for=dt.timedelta(days=3650))
        pair = ca.issue(
            ["cdo-clique-allocator.cdo-system.svc", "127.0.0.1"], valid_for=dt.timedelta(days=365)
        )
        self.tls_dir.mkdir(parents=True, exist_ok=True)
        (self.tls_dir / "tls.crt").write_bytes(pair.cert_pem)
        key = self.tls_dir / "tls.key"
        key.write_bytes(pair.key_pem)
        key.chmod(0o600)
        return ca.cert_pem

    async def register_webhook(self, ca_pem: bytes) -> None:
        """The pod webhook and the channel allocation webhook, by URL, trusting ``ca_pem``."""
        bodies = (
            (MUTATING, webhook_configuration(ca_bundle=ca_pem, url=self.webhook_url)),
            (
                VALIDATING,
                allocation_webhook_configuration(
                    ca_bundle=ca_pem, driver=DRIVER_NAME, url=self.webhook_url
                ),
            ),
        )
        client = await KubeClient.connect(kubeconfig=self.kubeconfig)
        try:
            for path, body in bodies:
                with contextlib.suppress(KubeApiError):
                    await client.request("DELETE", f"{path}/{DEFAULT_NAME}")
                await client.request("POST", path, body=body)
        finally:
            await client.close()

    async def supervise(self, child: _Child) -> None:
        delay = 0.0
        while not child.stop_requested.is_set():
            await child.start()
            self.publish()
            assert child.process is not None
            code = await child.process.wait()
            if child.stop_requested.is_set():
                return
            ran_s = time.time() - child.started_at
            delay = restart_delay(delay, ran_s)
            log.warning(
                "%s exited with %d after %.1f s; starting it again in %.1f s (log: %s)",
                child.spec.name,
                code,
                ran_s,
                delay,
                child.log_path,
            )
            child.restarts += 1
            await asyncio.sleep(delay)

    async def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for child in self.children.values():
            while not await asyncio.to_thread(_ready, child.spec.probe_url):
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"{child.spec.name} was not ready within {timeout_s:.0f} s; "
                        f"see {child.log_path}"
                    )
                await asyncio.sleep(0.2)

    async def run(self, *, ready_timeout_s: float) -> None:
        ca_pem = await self.prepare()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        supervisors = [
            asyncio.create_task(self.supervise(child), name=f"supervise {name}")
            for name, child in self.children.items()
        ]
        try:
            await self.wait_ready(ready_timeout_s)
            await self.register_webhook(ca_pem)
            self.ready = True
            self.publish()
            log.info("control plane ready; webhook at %s", self.webhook_url)
            await stop.wait()
        finally:
            await asyncio.gather(*(child.stop() for child in self.children.values()))
            for task in supervisors:
                task.cancel()
            await asyncio.gather(*supervisors, return_exceptions=True)
            (self.state_dir / STATE_FILE).unlink(missing_ok=True)


async def _wait_for_cluster(state_dir: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    path = state_dir / CLUSTER_FILE
    while True:
        try:
            return msgspec.json.decode(path.read_bytes(), type=_ClusterFile).kubeconfig
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"no simulated cluster in {state_dir} (start one: python -m sim up)"
                ) from None
            await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sim.controlplane",
        description="Run cdo's domain controller and clique allocator on a simulated cluster.",
    )
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the cluster and services"
    )
    parser.add_argument(
        "--nats-auth",
        action="store_true",
        help="connect each service to NATS with a token of its ServiceAccount (a server with "
        "the auth callout) instead of CDO_NATS_USER",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    state_dir: Path = args.state_dir.resolve()

    async def run() -> None:
        kubeconfig = await _wait_for_cluster(state_dir, args.timeout)
        await ControlPlane(state_dir, kubeconfig, nats_auth=args.nats_auth).run(
            ready_timeout_s=args.timeout
        )

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
