"""A real headless Chromium for the page's tests, driven by Playwright.

The browser is Debian's ``chromium`` (``./task tools:chromium`` installs it when missing;
``CDO_CHROMIUM`` names another executable); Playwright's own browser download is not used.
Each browser starts with a fresh profile in a temporary directory and the flags below, which
keep it from reaching out to the network (updates, sync, component downloads). Where Playwright
or the browser cannot be had, :func:`chromium` skips the test and says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

CHROMIUM_ENV = "CDO_CHROMIUM"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def executable() -> Path | None:
    """The browser to drive: ``$CDO_CHROMIUM``, else Debian's ``chromium`` on PATH."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return Path(named) if Path(named).is_file() else None
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None


@contextlib.asynccontextmanager
async def chromium(width: int = 1400, height: int = 900) -> AsyncIterator[object]:
    """A browser context (``playwright.async_api.BrowserContext``) with a fresh profile."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    browser = executable()
    if browser is None:
        pytest.skip(
            "no chromium: ./task tools:chromium installs Debian's, or set CDO_CHROMIUM to one"
        )
    profile = tempfile.mkdtemp(prefix="cdo-chromium-")
    try:
        async with async_playwright() as playwright:
            context = await playwright.chromium.launch_persistent_context(
                profile,
                executable_path=str(browser),
                headless=True,
                args=list(FLAGS),
                viewport={"width": width, "height": height},
            )
            try:
                yield context
            finally:
                await context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
