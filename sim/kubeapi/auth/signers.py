"""The signer checks kube-apiserver adds to CertificateSigningRequests (the CertificateApproval
and CertificateSigning admission plugins).

Writing a CSR's ``approval`` subresource needs ``approve``, and writing its ``status``
(where the certificate goes) needs ``sign``, on the cluster-scoped resource
``signers.certificates.k8s.io`` named by the CSR's ``spec.signerName``, or by its domain with
``/*`` (``example.com/*``), besides the usual permission on the subresource itself. A refusal
is a 403 naming the signer: ``user not permitted to approve requests with signerName "..."``.
The real CertificateSigning plugin asks only when a status write changes the certificate; the
emulator asks on every status write of a CSR, which is stricter and never lets more through.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.kubeapi.auth.attributes import Attributes
from sim.kubeapi.auth.identity import UserInfo
from sim.kubeapi.machinery import errors

GROUP = "certificates.k8s.io"
CSRS = "certificatesigningrequests"
VERBS = {"approval": "approve", "status": "sign"}


def signer_verb(group: str, resource: str, subresource: str) -> str | None:
    """The signer verb a write of ``resource/subresource`` needs (None: no signer check)."""
    if group != GROUP or resource != CSRS:
        return None
    return VERBS.get(subresource)


def signer_names(signer_name: str) -> tuple[str, ...]:
    """The ``signers`` resource names that grant ``signer_name``: itself and ``<domain>/*``."""
    domain = signer_name.split("/", 1)[0]
    return (signer_name, f"{domain}/*")


def check_signer(
    allowed: Callable[[Attributes], bool],
    *,
    user: UserInfo,
    verb: str,
    csr_name: str,
    signer_name: str,
) -> None:
    """Raise the plugin's 403 unless ``user`` may ``verb`` one of the signer's names."""
    for name in signer_names(signer_name):
        attrs = Attributes(user=user, verb=verb, group=GROUP, resource="signers", name=name)
        if allowed(attrs):
            return
    raise errors.forbidden_error(
        CSRS,
        GROUP,
        csr_name,
        f'user not permitted to {verb} requests with signerName "{signer_name}"',
    )
