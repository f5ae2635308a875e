"""Rendering a page in headless Chromium, for the tests that check pages as a reader sees them.

Chromium runs with a fresh profile, no network services and no sandbox (tests may run as
root); every console message it logs is returned (a self-contained page logs none: a missing
resource or a script error would).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["chromium", "screenshot"]

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--enable-logging=stderr", "--v=0")  # fmt: skip


def chromium() -> str:
    """The Chromium executable; skips the test, saying why, when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")


def screenshot(page: Path, png: Path, *, width: int = 1200, height: int = 1400) -> list[str]:
    """Render ``page`` into ``png``; the console messages it logged."""
    profile = png.parent / f"{png.stem}-profile"
    done = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
         f"--screenshot={png}", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert png.exists(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
