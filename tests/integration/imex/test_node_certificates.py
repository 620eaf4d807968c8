"""Simulated IMEX daemons with per-node certificates from the cdo signer's issuing code: a
node whose certificate expired (revoked: the signer renews it no more) is refused by its peers
when it connects again, while the others stay connected."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from services.domain_controller.csrsigning import CertificateAuthority, issue
from services.imex_agent.nodecert import build_request, key_pem
from shared import imexcert
from sim.imex import ConnectionState, ImexConfig, ImexDaemon, RefusalReason, parse_config
from tests.integration.imex.cluster import loopback_subnet
from tests.integration.imex.pki import Authority
from tests.integration.imex.test_inprocess import started, write_domain
from tests.support.wait import wait_for


def node_tls(
    config: ImexConfig, ca: Authority, node: str, root: Path, *, lifetime: dt.timedelta
) -> ImexConfig:
    """``config`` with mutual TLS from a certificate the signer would issue for ``node``."""
    key = ec.generate_private_key(ec.SECP256R1())
    authority = CertificateAuthority(cert_pem=ca.cert_path.read_bytes(), key_pem=ca.key_pem)
    cert = issue(
        authority,
        build_request(node, key),
        lifetime=lifetime,
        requested_s=None,
        now=dt.datetime.now(dt.UTC),
    )
    (root / f"{node}.key").write_bytes(key_pem(key))
    (root / f"{node}.crt").write_bytes(cert)
    lines = {
        "IMEX_ENABLE_AUTH_ENCRYPTION": "1",
        "IMEX_AUTH_SOURCE": "FILE",
        "IMEX_SECURITY_TARGET_OVERRIDE": imexcert.IMEX_NAME,
    }
    for side in ("SERVER", "CLIENT"):
        lines[f"IMEX_{side}_KEY"] = str(root / f"{node}.key")
        lines[f"IMEX_{side}_CERT"] = str(root / f"{node}.crt")
        lines[f"IMEX_{side}_CERT_AUTH"] = str(ca.cert_path)
    assert config.source is not None
    text = config.source.read_text() + "".join(f"{k}={v}\n" for k, v in lines.items())
    return parse_config(text, source=config.source)


async def test_an_expired_node_certificate_cannot_rejoin_and_the_others_stay(
    tmp_path: Path,
) -> None:
    subnet = loopback_subnet()
    addresses = [f"{subnet}.1", f"{subnet}.2", f"{subnet}.3"]
    ca = Authority(tmp_path / "ca", "cdo-imex-ca")
    configs = write_domain(tmp_path, addresses)
    hour = dt.timedelta(hours=1)
    configs = [
        node_tls(configs[0], ca, "node-a", tmp_path, lifetime=hour),
        node_tls(configs[1], ca, "node-b", tmp_path, lifetime=hour),
        # node-c was revoked: its last certificate runs out in a few seconds.
        node_tls(configs[2], ca, "node-c", tmp_path, lifetime=dt.timedelta(seconds=3)),
    ]
    a, b, c = (ImexDaemon(config) for config in configs)
    async with started([a, b]):
        async with started([c]):

            def all_connected() -> bool:
                return all(
                    link.status is ConnectionState.CONNECTED
                    for index, link in enumerate(a.status().connections)
                    if index != 0
                )

            await wait_for(all_connected, what="the three nodes connected")

        # node-c's certificate expires; it starts again with it and is refused.
        def expired() -> bool:
            return dt.datetime.now(dt.UTC) > dt.datetime.fromtimestamp(
                (tmp_path / "node-c.crt").stat().st_mtime, dt.UTC
            ) + dt.timedelta(seconds=3)

        await wait_for(expired, what="node-c's certificate to expire")
        async with started([ImexDaemon(configs[2])]) as (again,):

            def refused() -> bool:
                return all(
                    peer.status().connections[2].refused is RefusalReason.AUTHENTICATION_FAILED
                    for peer in (a, b)
                )

            await wait_for(refused, what="node-c refused by node-a and node-b")
            assert all(
                link.status is not ConnectionState.CONNECTED
                for index, link in enumerate(again.status().connections)
                if index != 2
            )
            assert a.status().connections[1].status is ConnectionState.CONNECTED
            assert b.status().connections[0].status is ConnectionState.CONNECTED
