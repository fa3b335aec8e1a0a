"""Headless Chromium for the report and compare pages (Debian's ``chromium``, driven by
Playwright). `.ci/run` installs it; where it is missing the tests skip and say how to get it.

Set ``TURNRL_SCREENSHOTS=DIR`` to have the screenshot test write the pages' pictures there
(``docs/`` keeps them for the README).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium_path() -> str | None:
    configured = os.environ.get("TURNRL_CHROMIUM")
    if configured:
        return configured
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium: install it (Debian: apt-get install chromium) or set "
                    "TURNRL_CHROMIUM to its binary")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install -e '.[dev]')")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable,
                                              args=["--no-sandbox"])
        yield launched
        launched.close()


class Page:
    """An opened page and everything it said or asked for."""

    def __init__(self, browser, path: Path, width: int = 1400) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 1000})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error"
                     else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_function(
            "document.querySelectorAll('.plot .main-svg').length >= "
            "document.querySelectorAll('.plot').length")

    @property
    def network(self) -> list[str]:
        """Requests other than the page's own file."""
        return [url for url in self.requests if not url.startswith("file://")]


@pytest.fixture
def open_page(browser) -> Iterator:
    pages: list[Page] = []

    def opener(path: Path, width: int = 1400) -> Page:
        pages.append(Page(browser, path, width))
        return pages[-1]

    yield opener
    for page in pages:
        page.page.close()
