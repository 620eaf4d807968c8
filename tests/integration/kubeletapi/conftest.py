from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.kubeletapi import PluginWatcher
from tests.integration.kubeletapi.helpers import ChannelDriver, running_watcher


@pytest.fixture
def node_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A short directory: unix socket paths are limited to 107 bytes and tmp_path carries the
    # whole test name.
    return tmp_path_factory.mktemp("node")


@pytest.fixture
def driver() -> ChannelDriver:
    return ChannelDriver()


@pytest.fixture
async def watcher(node_root: Path) -> AsyncIterator[PluginWatcher]:
    async with running_watcher(node_root) as running:
        yield running
