"""Every grant deploy/ gives a cdo service is used by the end-to-end suite, or docs/deploy.md
says why it is there.

The systems of the session recorded what each cdo ServiceAccount was authorized to do
(``grants.SESSION``); this module runs after every other test (``conftest.py``). Run alone, or
with only part of the suite, it skips and says what it could not check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.identities import render_base
from tests.e2e import grants

E2E = Path(__file__).resolve().parent
DEPLOY_DOC = E2E.parents[1] / "docs" / "deploy.md"


def e2e_modules() -> set[str]:
    return {path.name for path in E2E.glob("test_*.py")}


def test_every_grant_is_used_or_justified() -> None:
    why = grants.incomplete(e2e_modules())
    if why:
        pytest.skip(why)
    granted = grants.bound_grants(render_base())
    justified = grants.justified_grants(DEPLOY_DOC.read_text())
    unused = sorted(granted - grants.SESSION.used - set(justified))
    assert not unused, (
        "granted but not used by the end-to-end suite (trim the role in deploy/, or say why "
        "in docs/deploy.md's table):\n  " + "\n  ".join(map(str, unused))
    )


def test_the_justified_grants_are_granted() -> None:
    """The table names only grants the roles give (a trimmed grant leaves no stale row)."""
    granted = grants.bound_grants(render_base())
    justified = grants.justified_grants(DEPLOY_DOC.read_text())
    assert justified, "the table of justified grants is empty"
    stale = sorted(set(justified) - granted)
    assert not stale, "justified but not granted:\n  " + "\n  ".join(map(str, stale))
