"""Certificates renew on their own: the bootstrap's CronJob runs the install Job's pod every day,
and the program issues again what expires within 30 days and restarts what reads it only at
start (deploy/kustomize/base/bootstrap)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.resources import NAMESPACES, STATEFUL_SETS
from tests.integration.deploy.conftest import (
    NAMESPACE,
    OVERLAYS,
    Manifest,
    bootstrap_settings,
    find,
    generated,
    load_bootstrap,
    render_with,
)

bootstrap: Any = load_bootstrap()
NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
COMBINATIONS = {
    "base": (),
    "tls": ("tls",),
    "tls and cert-manager": ("tls", "cert-manager"),
    "nats-auth-callout": ("nats-auth-callout",),
}


def the_pair(objs: list[Manifest]) -> tuple[Manifest, Manifest]:
    return find(objs, "Job", "cdo-bootstrap"), find(objs, "CronJob", "cdo-bootstrap")


def check_the_pair(objs: list[Manifest]) -> None:
    job, cron = the_pair(objs)
    # The CronJob runs the install Job's pod: every check of the Job's pod template (security,
    # images, labels, RBAC, settings) holds for it too.
    scheduled = cron["spec"]["jobTemplate"]["spec"]
    assert scheduled["template"] == job["spec"]["template"]
    for key in ("backoffLimit", "activeDeadlineSeconds"):
        assert scheduled[key] == job["spec"][key], key
    assert cron["spec"]["jobTemplate"]["metadata"]["labels"] == job["metadata"]["labels"]
    # Every day, one run at a time, on UTC whatever the controller's zone.
    minute, hour, *rest = cron["spec"]["schedule"].split()
    assert minute.isdigit() and hour.isdigit() and rest == ["*", "*", "*"]
    assert cron["spec"]["timeZone"] == "Etc/UTC"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    settings = job["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert [ref["configMapRef"]["name"] for ref in settings] == [
        generated(objs, "ConfigMap", "cdo-bootstrap-env")["metadata"]["name"]
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_cronjob_runs_the_install_jobs_pod_every_day(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    check_the_pair(overlays[overlay])


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_every_component_changes_the_job_and_the_cronjob_alike(
    tmp_path: Path, combination: str
) -> None:
    components = COMBINATIONS[combination]
    objs = render_with(tmp_path / "overlay", components)
    check_the_pair(objs)
    settings = bootstrap_settings(objs)
    assert settings["CDO_BOOTSTRAP_CERTIFICATES"] == (
        "false" if "cert-manager" in components else "true"
    )
    issues_tls = "tls" in components and "cert-manager" not in components
    assert settings["CDO_BOOTSTRAP_TLS_CERTS"] == ("true" if issues_tls else "false")
    assert settings["CDO_BOOTSTRAP_NATS_AUTH_CALLOUT"] == (
        "true" if "nats-auth-callout" in components else "false"
    )


class _Meta(msgspec.Struct, rename="camel"):
    resource_version: str


class _Object(msgspec.Struct):
    metadata: _Meta


class _TemplateMeta(msgspec.Struct):
    annotations: dict[str, str] = {}


class _Template(msgspec.Struct):
    metadata: _TemplateMeta | None = None


class _StatefulSetSpec(msgspec.Struct):
    template: _Template


class _StatefulSet(msgspec.Struct):
    spec: _StatefulSetSpec


async def versions(client: KubeClient) -> dict[str, str]:
    """Every Secret's resourceVersion, and the NATS StatefulSet's."""
    found = {}
    for name in (
        bootstrap.CA_SECRET,
        bootstrap.WEBHOOK_SECRET,
        bootstrap.NATS_TLS_SECRET,
        bootstrap.IMEX_CA_SECRET,
        bootstrap.NATS_USERS_SECRET,
    ):
        raw = await client.get(bootstrap.SECRETS, name, namespace=NAMESPACE)
        found[name] = msgspec.json.decode(raw, type=_Object).metadata.resource_version
    raw = await client.get(STATEFUL_SETS, bootstrap.NATS_STATEFULSET, namespace=NAMESPACE)
    found["statefulset"] = msgspec.json.decode(raw, type=_Object).metadata.resource_version
    return found


async def restarted_at(client: KubeClient) -> str | None:
    raw = await client.get(STATEFUL_SETS, bootstrap.NATS_STATEFULSET, namespace=NAMESPACE)
    template = msgspec.json.decode(raw, type=_StatefulSet).spec.template.metadata
    return None if template is None else template.annotations.get(bootstrap.RESTARTED_AT)


async def test_a_daily_run_renews_a_month_before_expiry_and_restarts_nats(
    kube_client: KubeClient, overlays: dict[str, list[Manifest]]
) -> None:
    prod = overlays["prod"]
    await kube_client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    webhook = find(prod, "MutatingWebhookConfiguration", "cdo-clique-allocator")
    await kube_client.create(bootstrap.MUTATING_WEBHOOKS, webhook)
    validating = find(prod, "ValidatingWebhookConfiguration", "cdo-clique-allocator")
    await kube_client.create(bootstrap.VALIDATING_WEBHOOKS, validating)
    crd = find(prod, "CustomResourceDefinition", bootstrap.CONVERSION_CRD)
    await kube_client.create(bootstrap.CRDS, crd)
    await kube_client.create(
        STATEFUL_SETS, find(prod, "StatefulSet", "cdo-nats"), namespace=NAMESPACE
    )
    settings = bootstrap.BootstrapSettings(namespace=NAMESPACE, tls_certs=True, imex_ca=True)
    program = bootstrap.Bootstrap(kube_client, settings=settings)

    # Install: everything issued; the servers start with it, nothing to restart.
    await program.run(NOW)
    assert await restarted_at(kube_client) is None
    installed = await versions(kube_client)

    # The daily runs of the next eleven months find everything good and write nothing.
    for days in (1, 100, 330):
        await program.run(NOW + dt.timedelta(days=days))
        assert await versions(kube_client) == installed, days

    # 30 days before the leaves expire: issued again (same CA), the NATS servers rolled.
    renewal = NOW + dt.timedelta(days=336)
    await program.run(renewal)
    renewed = await versions(kube_client)
    for name in (bootstrap.WEBHOOK_SECRET, bootstrap.NATS_TLS_SECRET):
        assert renewed[name] != installed[name], name
    assert renewed[bootstrap.IMEX_CA_SECRET] == installed[bootstrap.IMEX_CA_SECRET]
    assert renewed[bootstrap.CA_SECRET] == installed[bootstrap.CA_SECRET]
    assert renewed[bootstrap.NATS_USERS_SECRET] == installed[bootstrap.NATS_USERS_SECRET]
    assert await restarted_at(kube_client) == renewal.strftime("%Y-%m-%dT%H:%M:%SZ")

    # The next day's run has nothing to do again.
    await program.run(renewal + dt.timedelta(days=1))
    assert await versions(kube_client) == renewed
