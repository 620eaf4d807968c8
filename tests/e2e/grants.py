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

from sim.identities import NAMESPACE, SERVICE_ACCOUNTS

SA_PREFIX = f"system:serviceaccount:{NAMESPACE}:"


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
    return account if account in SERVICE_ACCOUNTS else None


def take_record(record: Path) -> list[str]:
    """Add the record's cdo grants to :data:`SESSION`; the 403s cdo's services got there."""
    try:
        users = json.loads(record.read_text())["users"]
    except FileNotFoundError:
        SESSION.missing.append(str(record))
        return [f"{record}: the API emulator kept no access record"]
    SESSION.recorded += 1
    denials: list[str] = []
    for user, usage in users.items():
        account = account_of(user)
        if account is None:
            continue
        SESSION.used.update(
            Grant(account, e["verb"], e["group"], e["resource"], e["subresource"])
            for e in usage["allowed"]
            if e["resource"]
        )
        denials += [f"{account}: {entry['message']}" for entry in usage["denied"]]
        if usage["denied_total"] > len(usage["denied"]):
            denials.append(f"{account}: {usage['denied_total'] - len(usage['denied'])} more")
    return denials
