"""The webhook's serving certificate is read again when its files change."""

from __future__ import annotations

import os
from pathlib import Path

from services.clique_allocator.webhook.server import CertificateFiles
from sim.kubeapi.admission.certificates import CertificateAuthority


def write_pair(directory: Path, ca: CertificateAuthority, *, when: float) -> None:
    pair = ca.issue(["127.0.0.1"])
    for name, data in (("tls.crt", pair.cert_pem), ("tls.key", pair.key_pem)):
        path = directory / name
        path.write_bytes(data)
        os.utime(path, (when, when))


def test_a_renewed_certificate_is_loaded_and_a_broken_one_is_not(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    write_pair(tmp_path, ca, when=1_000)
    files = CertificateFiles(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    assert not files.reload_if_changed()
    write_pair(tmp_path, ca, when=2_000)
    assert files.reload_if_changed() and files.loads == 2
    (tmp_path / "tls.key").write_bytes(b"half written")
    assert not files.reload_if_changed()  # kept serving the previous pair
    write_pair(tmp_path, ca, when=3_000)
    assert files.reload_if_changed() and files.loads == 3
