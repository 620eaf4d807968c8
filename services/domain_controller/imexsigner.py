"""The IMEX signer: approves or denies, then signs, the nodes' IMEX certificate requests.

Runs in the leading domain controller when ``CDO_DOMAIN_CONTROLLER_IMEX_SIGNER=true`` (the
imex-tls component). It watches the CertificateSigningRequests whose ``spec.signerName`` is
:data:`shared.imexcert.SIGNER_NAME` and converges each one:

1. neither ``Approved`` nor ``Denied``: decide (:mod:`.csrverdict`) against the revocations
   ConfigMap read now, and write the condition through the ``approval`` subresource; a denial
   also becomes a Warning Event on the request naming the reason;
2. approved, not failed, no certificate yet: issue it (:mod:`.csrsigning`) with the IMEX CA
   read now from its Secret and write it through the ``status`` subresource. A missing CA
   leaves the request pending, says what to create (a Warning Event ``ImexCaMissing`` and the
   log) and retries with backoff: the operator's fix is picked up without a restart;
3. denied, failed or issued: nothing to do.

Reading the ConfigMap and the Secret on every request (not a watch) keeps the signer's
permissions to ``get`` of those two names, and a request is rare (one per node per renewal).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
from typing import Any

import msgspec

from services.domain_controller.csrsigning import MissingCaError, ca_from_secret, issue
from services.domain_controller.csrverdict import UnreadableRequestError, decide, facts_of
from shared import imexcert
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from shared.kube.keys import ObjectKey
from shared.kube.meta import KubeObject
from shared.kube.reconcile import ReconcileRunner, Result
from shared.kube.recorder import EventRecorder
from shared.kube.resources import CERTIFICATE_SIGNING_REQUESTS as CSRS
from shared.kube.resources import CONFIG_MAPS, SECRETS
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics

log = logging.getLogger("cdo.domain_controller.imex_signer")

CA_RETRY_S = 30.0
"""How often a request waiting for the IMEX CA is looked at again (``ca_retry_s``)."""


class Csr(KubeObject, frozen=True, kw_only=True):
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    status: dict[str, Any] = msgspec.field(default_factory=dict)

    def condition(self, kind: str) -> bool:
        return any(
            isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
            for c in self.status.get("conditions") or ()
        )


class _Object(msgspec.Struct, frozen=True):
    data: dict[str, str] = msgspec.field(default_factory=dict)


_decode_object = msgspec.json.Decoder(_Object)
_decode_csr = msgspec.json.Decoder(Csr)


class ImexSigner:
    """See the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        agent_user: str,
        lifetime: dt.timedelta,
        recorder: EventRecorder,
        metrics: Metrics,
        ca_retry_s: float = CA_RETRY_S,
    ) -> None:
        self._client = client
        self._ca_retry_s = ca_retry_s
        self._namespace = namespace
        self._agent_user = agent_user
        self._lifetime = lifetime
        self._recorder = recorder
        self.informer = Informer(
            client,
            CSRS,
            Csr,
            field_selector=f"spec.signerName={imexcert.SIGNER_NAME}",
            metrics=metrics,
        )
        self.queue = WorkQueue[ObjectKey](name="imex-csrs", metrics=metrics)
        self.informer.add_handler(self._enqueue)
        self.runner = ReconcileRunner(
            name="imex-csrs", queue=self.queue, reconcile=self.reconcile, metrics=metrics
        )

    def _enqueue(self, old: Csr | None, new: Csr | None) -> None:
        obj = new or old
        if obj is not None:
            self.queue.add(ObjectKey(name=obj.metadata.name))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.informer.run(), name="imex csr informer")
            group.create_task(self.runner.run(), name="imex csr signer")

    async def reconcile(self, key: ObjectKey) -> Result:
        csr = self.informer.cache.get(key.name)
        if csr is None or csr.spec.get("signerName") != imexcert.SIGNER_NAME:
            return Result()
        if csr.condition("Denied") or csr.condition("Failed") or csr.status.get("certificate"):
            return Result()
        if not csr.condition("Approved"):
            return await self._decide(csr)
        return await self._sign(csr)

    async def _decide(self, csr: Csr) -> Result:
        request = base64.b64decode(csr.spec.get("request") or "")
        try:
            facts = facts_of(csr.spec, request)
        except UnreadableRequestError as exc:
            return await self._write_verdict(csr, False, "UnreadableRequest", str(exc))
        verdict = decide(facts, agent_user=self._agent_user, revoked=await self._revoked())
        return await self._write_verdict(csr, verdict.approved, verdict.reason, verdict.message)

    async def _write_verdict(self, csr: Csr, approved: bool, reason: str, message: str) -> Result:
        current = _decode_csr.decode(await self._client.get(CSRS, csr.metadata.name))
        body = msgspec.to_builtins(current)
        conditions = list(current.status.get("conditions") or ())
        conditions.append(
            {
                "type": "Approved" if approved else "Denied",
                "status": "True",
                "reason": reason,
                "message": message,
            }
        )
        body.setdefault("status", {})["conditions"] = conditions
        body["apiVersion"], body["kind"] = CSRS.api_version, CSRS.kind
        await self._client.replace(CSRS, csr.metadata.name, body, subresource="approval")
        log.info(
            "IMEX certificate request %s",
            "approved" if approved else "denied",
            extra={"csr": csr.metadata.name, "reason": reason, "detail": message},
        )
        if not approved:
            await self._recorder.record(CSRS, csr, type_="Warning", reason=reason, message=message)
        return Result()

    async def _sign(self, csr: Csr) -> Result:
        try:
            raw = await self._client.get_or_none(
                SECRETS, imexcert.CA_SECRET, namespace=self._namespace
            )
            ca = ca_from_secret(self._namespace, _data(raw, decode=True))
        except MissingCaError as exc:
            log.error("cannot sign IMEX certificates", extra={"error": str(exc)})
            await self._recorder.record(
                CSRS, csr, type_="Warning", reason="ImexCaMissing", message=str(exc)
            )
            return Result(requeue_after=self._ca_retry_s)
        requested = csr.spec.get("expirationSeconds")
        pem = issue(
            ca,
            base64.b64decode(csr.spec.get("request") or ""),
            lifetime=self._lifetime,
            requested_s=requested if isinstance(requested, int) else None,
            now=dt.datetime.now(dt.UTC),
        )
        current = _decode_csr.decode(await self._client.get(CSRS, csr.metadata.name))
        body = msgspec.to_builtins(current)
        body.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode()
        body["apiVersion"], body["kind"] = CSRS.api_version, CSRS.kind
        await self._client.replace(CSRS, csr.metadata.name, body, subresource="status")
        log.info("IMEX certificate issued", extra={"csr": csr.metadata.name})
        return Result()

    async def _revoked(self) -> dict[str, str]:
        raw = await self._client.get_or_none(
            CONFIG_MAPS, imexcert.REVOCATIONS_CONFIGMAP, namespace=self._namespace
        )
        return _data(raw, decode=False) or {}


def _data(raw: bytes | None, *, decode: bool) -> dict[str, Any] | None:
    """A Secret's decoded or a ConfigMap's ``data`` (None: no such object)."""
    if raw is None:
        return None
    data = _decode_object.decode(raw).data
    if not decode:
        return dict(data)
    return {key: base64.b64decode(value) for key, value in data.items()}
