"""The pieces of the used-grants check: roles expanded to grants, the justification table read
from Markdown, and the reasons a session cannot be checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e import grants
from tests.e2e.grants import Grant

BINDING = {
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "b"},
    "roleRef": {"kind": "ClusterRole", "name": "r"},
    "subjects": [{"kind": "ServiceAccount", "name": "cdo-imex-agent", "namespace": "cdo-system"}],
}
ROLE = {
    "kind": "ClusterRole",
    "metadata": {"name": "r"},
    "rules": [{"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["patch"]}],
}
TABLE = """# Deploying

### Grants the end-to-end suite does not use

| account | verbs | API group | resource | why |
|---|---|---|---|---|
| `cdo-imex-agent` | update delete | resource.k8s.io | resourceslices | stray slices |
| `cdo-health-monitor` | create | core | pods/eviction | a fault of one GPU |

## Next
| not | part | of | it | x |
"""


def test_roles_expand_to_one_grant_per_verb_and_resource() -> None:
    assert grants.bound_grants([ROLE, BINDING]) == {
        Grant("cdo-imex-agent", "patch", "", "nodes"),
        Grant("cdo-imex-agent", "patch", "", "nodes", "status"),
    }


def test_accounts_other_than_cdo_services_are_left_out() -> None:
    other = {**BINDING, "subjects": [{"kind": "ServiceAccount", "name": "cdo-bootstrap"}]}
    assert grants.bound_grants([ROLE, other]) == set()


def test_the_table_is_read_with_its_reasons() -> None:
    assert grants.justified_grants(TABLE) == {
        Grant("cdo-imex-agent", "update", "resource.k8s.io", "resourceslices"): "stray slices",
        Grant("cdo-imex-agent", "delete", "resource.k8s.io", "resourceslices"): "stray slices",
        Grant("cdo-health-monitor", "create", "", "pods", "eviction"): "a fault of one GPU",
    }


def test_a_row_without_a_reason_is_refused() -> None:
    bad = TABLE.replace("stray slices", " ")
    with pytest.raises(AssertionError, match="a reason"):
        grants.justified_grants(bad)


def test_a_session_with_part_of_the_suite_says_what_is_left_out() -> None:
    selection = grants.Selection(modules={"test_a.py"})
    session = grants.SessionGrants(started=1, recorded=1)
    assert "test_b.py" in grants.incomplete(
        {"test_a.py", "test_b.py"}, selection=selection, session=session
    )
    assert grants.incomplete({"test_a.py"}, selection=selection, session=session) == ""
    selection.failed.append("tests/e2e/test_a.py::t")
    assert "failed" in grants.incomplete({"test_a.py"}, selection=selection, session=session)
    assert "no end-to-end system" in grants.incomplete(
        {"test_a.py"},
        selection=grants.Selection(modules={"test_a.py"}),
        session=grants.SessionGrants(),
    )


def test_a_record_gives_the_cdo_grants_and_their_refusals(tmp_path: Path) -> None:
    agent = "system:serviceaccount:cdo-system:cdo-imex-agent"
    allowed = {"verb": "patch", "group": "", "resource": "nodes", "subresource": "status"}
    record = {
        "users": {
            agent: {
                "allowed": [{**allowed, "path": ""}],
                "denied": [{**allowed, "verb": "delete", "message": "nodes is forbidden: x"}],
                "denied_total": 3,
            },
            "kubernetes-admin": {
                "allowed": [{**allowed, "verb": "get", "path": ""}],
                "denied": [],
                "denied_total": 0,
            },
        }
    }
    path = tmp_path / "access.json"
    path.write_text(json.dumps(record))
    session = grants.SessionGrants()
    denials = grants.take_record(path, session=session)
    assert denials == ["cdo-imex-agent: nodes is forbidden: x", "cdo-imex-agent: 2 more"]
    assert session.used == {Grant("cdo-imex-agent", "patch", "", "nodes", "status")}
    assert session.recorded == 1
    assert grants.take_record(tmp_path / "none.json", session=session) != []
    assert session.missing == [str(tmp_path / "none.json")]
