"""What ``cdo preflight`` makes of the objects it reads: releases, workload readiness, a
certificate's end."""

from __future__ import annotations

import datetime as dt

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from cli.preflight.gather import VersionInfo, certificate_expiry, release_of, workload_of
from sim.kubeapi.admission.certificates import CertificateAuthority


def test_releases_as_managed_clusters_report_them() -> None:
    assert release_of(VersionInfo(major="1", minor="35", git_version="v1.35.1")) == (1, 35)
    assert release_of(VersionInfo(major="1", minor="34+", git_version="v1.34.2-eks")) == (1, 34)
    assert release_of(VersionInfo(major="", minor="")) is None


def test_workloads_count_their_ready_replicas() -> None:
    daemonset = msgspec.json.encode(
        {"status": {"desiredNumberScheduled": 18, "numberReady": 17, "replicas": 99}}
    )
    found = workload_of("DaemonSet", "cdo-imex-agent", daemonset)
    assert (found.found, found.desired, found.ready) == (True, 18, 17)
    deployment = msgspec.json.encode({"spec": {"replicas": 2}, "status": {"readyReplicas": 1}})
    assert workload_of("Deployment", "d", deployment).desired == 2
    assert workload_of("Deployment", "d", None).found is False


def test_a_certificates_end_from_pem_and_der() -> None:
    pair = CertificateAuthority("t").issue(["127.0.0.1"], valid_for=dt.timedelta(days=10))
    end = certificate_expiry(pair.cert_pem)
    assert dt.timedelta(days=9) < end - dt.datetime.now(dt.UTC) <= dt.timedelta(days=10)
    der = x509.load_pem_x509_certificate(pair.cert_pem).public_bytes(Encoding.DER)
    assert certificate_expiry(der) == end
