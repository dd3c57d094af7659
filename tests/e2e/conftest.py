"""Browser tests: Playwright driving Debian's Chromium (``apt-get install chromium``) against ``live_server``."""
import os
from pathlib import Path

import pytest
from django.db import connections

# Playwright's sync API runs an asyncio event loop in this thread; Django's ORM calls made by the test itself
# (creating rows, checking results) would otherwise be refused as "async unsafe".
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def browser():
    """A headless Chromium from /usr/bin/chromium; skips when it is absent (never downloads a browser)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: install Debian's browser with `apt-get install -y chromium`")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield browser
        finally:
            browser.close()
            # ORM calls made while Playwright's loop runs use their own connection (asgiref's context-local
            # storage); close it here, or PostgreSQL refuses to drop the test database at the end.
            connections.close_all()


@pytest.fixture
def page(browser):
    """A fresh page (1280×900) whose actions time out after 10 s."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def axe_path() -> Path:
    """axe-core's script from ``node_modules``; skips locally without it (``npm ci``), fails in CI."""
    from tests.e2e.helpers import AXE

    if not AXE.exists():
        if os.environ.get("ORCA_CI"):
            pytest.fail(f"{AXE} is absent in CI: `make test` runs `npm ci` first")
        pytest.skip(f"{AXE} is absent: run `npm ci` (make setup does)")
    return AXE
