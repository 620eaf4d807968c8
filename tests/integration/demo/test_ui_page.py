"""``./task demo -- --ui``: the page server the demo starts beside its story.

Started as the demo starts it (a process of its own), against a cluster that does not answer:
the page is served all the same (it says the cluster is unreachable), and stopping it ends the
process. The page against a running cluster is tested in tests/e2e/test_ui_browser.py.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from sim.demo.uipage import start_ui_page
from sim.natsserver import free_port
from tests.integration.cli.conftest import dead_kubeconfig


def test_the_demo_serves_the_page_and_stops_it(tmp_path: Path) -> None:
    kubeconfig = dead_kubeconfig(tmp_path / "kubeconfig", free_port())
    page = start_ui_page(
        kubeconfig=str(kubeconfig),
        nats_url=f"nats://127.0.0.1:{free_port()}",
        nats_token_file="",
        log=tmp_path / "logs" / "ui.log",
    )
    try:
        with urllib.request.urlopen(page.url, timeout=5) as reply:
            assert reply.status == 200
            assert b"<html" in reply.read().lower()
    finally:
        page.stop()
    assert page.process.returncode is not None, "the page server still runs after stop()"
