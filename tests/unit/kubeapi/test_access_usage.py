"""The access record: distinct grants per user, refusals with their message, a version that
moves only on change."""

from __future__ import annotations

from sim.kubeapi.auth.attributes import Attributes, non_resource
from sim.kubeapi.auth.identity import UserInfo
from sim.kubeapi.auth.usage import DENIED_KEPT, AccessUsage

AGENT = UserInfo(name="system:serviceaccount:cdo-system:cdo-imex-agent")


def attrs(verb: str, resource: str, subresource: str = "", name: str = "n1") -> Attributes:
    return Attributes(user=AGENT, verb=verb, resource=resource, subresource=subresource, name=name)


def test_allowed_requests_are_kept_once_each() -> None:
    usage = AccessUsage()
    usage.allowed(attrs("patch", "nodes", "status"))
    version = usage.version
    usage.allowed(attrs("patch", "nodes", "status", name="n2"))
    assert usage.version == version  # the same grant again changes nothing
    usage.allowed(non_resource(AGENT, "GET", "/version"))
    [user] = usage.snapshot()["users"].values()
    assert user["allowed"] == [
        {"verb": "get", "group": "", "resource": "", "subresource": "", "path": "/version"},
        {"verb": "patch", "group": "", "resource": "nodes", "subresource": "status", "path": ""},
    ]
    assert user["denied"] == [] and user["denied_total"] == 0


def test_refusals_keep_their_message_and_are_counted_past_the_limit() -> None:
    usage = AccessUsage()
    for _ in range(DENIED_KEPT + 5):
        usage.denied(attrs("delete", "nodes"), 'nodes "n1" is forbidden: ...')
    user = usage.snapshot()["users"][AGENT.name]
    assert len(user["denied"]) == DENIED_KEPT
    assert user["denied_total"] == DENIED_KEPT + 5
    assert user["denied"][0] == {
        "verb": "delete",
        "group": "",
        "resource": "nodes",
        "subresource": "",
        "path": "",
        "namespace": "",
        "name": "n1",
        "message": 'nodes "n1" is forbidden: ...',
    }
