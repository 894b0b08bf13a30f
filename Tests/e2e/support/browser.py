"""Debian's chromium, headless, driven by Playwright (issue 35): Playwright's own browser
downloads cannot be had here, so it is given the binary Debian installs. Every request
the page makes and every response it gets are recorded, to check that nothing leaves for
another origin and that every answer carries the page's security headers."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")


def chromium_path() -> str | None:
    for p in CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return shutil.which("chromium")


def have_browser() -> tuple[bool, str]:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False, "Playwright is not installed: run scripts/setup"
    if not chromium_path():
        return False, "Debian's chromium is not installed: run scripts/setup"
    return True, ""


class Browser:
    """One headless chromium; `page()` opens a tab in a fresh context (its own cookies)
    whose requests and responses are recorded in `requests` and `responses`."""

    def __init__(self, resolver_rules: str | None = None):
        from playwright.sync_api import sync_playwright
        self._pw = sync_playwright().start()
        args = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
        if resolver_rules:
            args.append(f"--host-resolver-rules={resolver_rules}")
        self.browser = self._pw.chromium.launch(executable_path=chromium_path(), headless=True, args=args)
        self.requests: list[str] = []
        self.responses: list = []

    def page(self, width: int = 1280, height: int = 1400):
        context = self.browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("response", lambda r: self.responses.append(r))
        return page

    def close(self):
        try:
            self.browser.close()
        finally:
            self._pw.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def page_values(page) -> dict:
    """Every [data-field] of the page: its raw value (as the daemon said it) and its text."""
    return page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('[data-field]'))
        .map(e => [e.dataset.field, {value: e.dataset.value ? JSON.parse(e.dataset.value) : null, text: e.textContent}]))""")


def screenshot(page, name: str) -> Path:
    from support.run import output_dir
    out = output_dir() / "web"
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot of the status page: {path}")
    return path
