#!/usr/bin/env python3
"""Draws the status page as a browser shows it: Debian's headless chromium (through
Playwright, as the tests drive it) opens URL, waits for the first status, and saves a
full-page PNG. Used by scripts/demo; `scripts/page_shot.py URL OUT.png`."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "e2e"))

from support.browser import Browser, have_browser  # noqa: E402


def main() -> int:
    url, out = sys.argv[1], sys.argv[2]
    ok, why = have_browser()
    if not ok:
        print(f"page_shot: {why}", file=sys.stderr)
        return 1
    with Browser() as browser:
        page = browser.page(width=1280, height=1200)
        page.goto(url)
        page.wait_for_selector("[data-field='state'][data-value]")
        page.wait_for_timeout(1500)
        page.screenshot(path=out, full_page=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
