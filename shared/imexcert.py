"""What a node's IMEX certificate looks like: the names the IMEX agent requests and the signer
checks (docs/security.md, "IMEX certificates").

Each GPU node's IMEX agent makes its own key and asks for a certificate through a
``certificates.k8s.io/v1`` CertificateSigningRequest for :data:`SIGNER_NAME`. The certificate
names the node: subject ``CN=<node>``, DNS names ``<node>`` and :data:`IMEX_NAME` (the name every
daemon checks its peers against, ``IMEX_SECURITY_TARGET_OVERRIDE``), usages server and client
auth. It is signed by the IMEX CA (Secret :data:`CA_SECRET`, ``tls.crt`` and ``tls.key``), a CA of
its own that signs nothing else, so no other certificate cdo issues is an IMEX peer.
"""

from __future__ import annotations

SIGNER_NAME = "cdo.dev/imex"
"""The ``spec.signerName`` of IMEX certificate requests; the domain controller signs them."""
IMEX_NAME = "cdo-imex"
"""The DNS name in every node's certificate that peers check (IMEX_SECURITY_TARGET_OVERRIDE)."""
CA_SECRET = "cdo-imex-ca"
"""The IMEX CA in cdo's namespace (``tls.crt``, ``tls.key``): made by the cdo-bootstrap Job, or
by cert-manager with the cert-manager component."""
REVOCATIONS_CONFIGMAP = "cdo-imex-revocations"
"""Nodes whose IMEX certificate is revoked: one key per node name (the value says why). Only
an operator writes it; the signer refuses every request of a node listed there."""
USAGES = ("digital signature", "server auth", "client auth")
"""The key usages a node's request asks for and its certificate carries."""
NODE_LABEL = "cdo.dev/imex-node"
"""On each request the agent makes: the node it is for (to list one node's requests)."""


def request_name(node: str, key_digest: str) -> str:
    """The CSR's name: one per node and key, so a retry after a restart finds its request."""
    return f"cdo-imex-{node}-{key_digest[:12]}"
