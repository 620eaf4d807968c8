"""The end-to-end suite's collection: the used-grants check runs after every other test of the
session, and learns which end-to-end modules the session selected and whether any failed."""

from __future__ import annotations

from pathlib import Path

import pytest

# Assertions in the shared scenarios report their values as a test module's do.
pytest.register_assert_rewrite("tests.e2e.scenarios")

from tests.e2e import grants  # noqa: E402 - after the registration above

E2E = Path(__file__).resolve().parent
LAST = "test_used_grants.py"


def _e2e_module(item: pytest.Item) -> str | None:
    path = Path(str(item.path)).resolve()
    return path.name if path.parent == E2E else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _e2e_module(item) == LAST)


def pytest_deselected(items: list[pytest.Item]) -> None:
    grants.SELECTION.deselected.update(
        module for item in items if (module := _e2e_module(item)) is not None
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    grants.SELECTION.modules.update(
        module for item in session.items if (module := _e2e_module(item)) is not None
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        grants.SELECTION.failed.append(report.nodeid)
