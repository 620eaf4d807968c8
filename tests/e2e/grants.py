"""What cdo's services were allowed and refused on the end-to-end systems, over the test session.

Each system's API emulator keeps its access record (``<state dir>/access.json``, format in
``sim/kubeapi/auth/usage.py``). When a system stops, :func:`take_record` reads it: the grants
each cdo ServiceAccount used go into :data:`SESSION`, and every 403 one of them got is returned
so that the system's module fails. ``test_used_grants.py`` compares the session's union with
the roles deploy/ grants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.control.natsauth import AUTHENTICATOR
from sim.identities import NAMESPACE, SERVICE_ACCOUNTS

SA_PREFIX = f"system:serviceaccount:{NAMESPACE}:"
CDO_ACCOUNTS = (*SERVICE_ACCOUNTS, AUTHENTICATOR)
"""cdo's programs' ServiceAccounts: the four services, and the NATS authenticator of the
systems that run NATS identities (its role is the nats-auth-callout component's)."""


@dataclass(frozen=True, order=True)
class Grant:
    """One verb on one resource or subresource; ``group`` "" is the core API."""

    account: str
    verb: str
    group: str
    resource: str
    subresource: str = ""

    def __str__(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.account}: {self.verb} {self.group or 'core'} {resource}"


@dataclass
class SessionGrants:
    """The grants used by cdo's services on every system of this session."""

    started: int = 0
    """Systems that came up (each should leave a record)."""
    recorded: int = 0
    used: set[Grant] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)
    """State directories whose system kept no access record."""


SESSION = SessionGrants()


def account_of(user: str) -> str | None:
    """The cdo ServiceAccount a user name stands for, or None."""
    if not user.startswith(SA_PREFIX):
        return None
    account = user.removeprefix(SA_PREFIX)
    return account if account in CDO_ACCOUNTS else None


def take_record(record: Path, *, session: SessionGrants = SESSION) -> list[str]:
    """Add the record's cdo grants to ``session``; the 403s cdo's services got there."""
    try:
        users = json.loads(record.read_text())["users"]
    except FileNotFoundError:
        session.missing.append(str(record))
        return [f"{record}: the API emulator kept no access record"]
    session.recorded += 1
    denials: list[str] = []
    for user, usage in users.items():
        account = account_of(user)
        if account is None:
            continue
        session.used.update(
            Grant(account, e["verb"], e["group"], e["resource"], e["subresource"])
            for e in usage["allowed"]
            if e["resource"]
        )
        denials += [f"{account}: {entry['message']}" for entry in usage["denied"]]
        if usage["denied_total"] > len(usage["denied"]):
            denials.append(f"{account}: {usage['denied_total'] - len(usage['denied'])} more")
    return denials


@dataclass
class Selection:
    """Which end-to-end modules this session runs, and whether any of their tests failed."""

    modules: set[str] = field(default_factory=set)
    deselected: set[str] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)


SELECTION = Selection()


def incomplete(
    all_modules: set[str], *, selection: Selection = SELECTION, session: SessionGrants = SESSION
) -> str:
    """Why the session's record cannot show every grant the suite uses ("" when it can)."""
    missing = sorted(all_modules - selection.modules)
    if missing:
        return (
            f"only part of the end-to-end suite runs in this session ({len(missing)} of "
            f"{len(all_modules)} modules left out, e.g. {missing[0]}): the grants it uses "
            "cannot be checked; run the whole suite (pytest tests/e2e)"
        )
    if selection.deselected:
        return (
            f"tests of {sorted(selection.deselected)[0]} were deselected: the grants the "
            "suite uses cannot be checked"
        )
    if selection.failed:
        return f"{selection.failed[0]} failed: the record of used grants is incomplete"
    if session.started == 0:
        return "no end-to-end system ran in this session"
    if session.missing:
        return f"a system kept no access record: {session.missing[0]}"
    return ""


def bound_grants(objs: list[dict[str, Any]]) -> set[Grant]:
    """Every grant the rendered roles give cdo's ServiceAccounts (one per verb and resource)."""
    roles = {
        (obj["kind"], obj["metadata"]["name"]): obj
        for obj in objs
        if obj["kind"] in ("Role", "ClusterRole")
    }
    found: set[Grant] = set()
    for binding in objs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        for subject in binding["subjects"]:
            if subject["kind"] != "ServiceAccount" or subject["name"] not in SERVICE_ACCOUNTS:
                continue
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        plural, _, sub = resource.partition("/")
                        found.update(
                            Grant(subject["name"], verb, group, plural, sub)
                            for verb in rule["verbs"]
                        )
    return found


JUSTIFIED_HEADING = "### Grants the end-to-end suite does not use"


def justified_grants(markdown: str) -> dict[Grant, str]:
    """The table under :data:`JUSTIFIED_HEADING`: each grant with the reason given for it.

    Columns: account, verbs (space separated), API group (``core`` for ""), resource
    (``plural`` or ``plural/subresource``), why.
    """
    lines = markdown.splitlines()
    if JUSTIFIED_HEADING not in lines:
        raise AssertionError(f"docs/deploy.md has no section {JUSTIFIED_HEADING!r}")
    start = lines.index(JUSTIFIED_HEADING) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([cell.strip().strip("`") for cell in line.strip().strip("|").split("|")])
    header, _rule, *body = rows
    assert [h.lower() for h in header[:4]] == ["account", "verbs", "api group", "resource"], header
    found: dict[Grant, str] = {}
    for cells in body:
        assert len(cells) == 5 and cells[4], f"a row needs five cells and a reason: {cells}"
        account, verbs, group, resource, why = cells
        plural, _, sub = resource.partition("/")
        for verb in verbs.split():
            found[Grant(account, verb, "" if group == "core" else group, plural, sub)] = why
    return found
