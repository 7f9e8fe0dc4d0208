"""Debian's Chromium driven by Playwright, shut off from everything but loopback.

Playwright's own browser download cannot work here, so the browser is the
system's ``/usr/bin/chromium`` (``.ci/run`` installs it with apt when missing);
tests that need it skip with the reason when it or Playwright is missing.  The
browser gets a fresh profile, and a proxy and resolver rules that reach nothing:
a page that tried to load anything from elsewhere would fail, and the tests
also watch every request it makes.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]


def missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed (pip install '.[test]')"
    if shutil.which(CHROMIUM) is None:
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


needs_browser = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@contextmanager
def browser(profile: Path, **options: Any) -> Iterator[Any]:
    """A Chromium context with a fresh profile (``launch_persistent_context``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1400, "height": 1000}, **options)
        try:
            yield context
        finally:
            context.close()
