"""What the console tests share (a module of its own: `conftest` is a name every test
directory has, so tests cannot import from it when the whole suite runs)."""

from __future__ import annotations

import os
import re
import shutil

TOKEN = "console-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
XSS = ["<img src=x onerror=alert(1)>", "</script><script>alert(1)</script>"]


def browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for name, path in (("chromium", chromium()), ("chromedriver", chromedriver())):
        if not path or not os.access(path, os.X_OK):
            return (f"{name} not found: apt-get install chromium chromium-driver "
                    "(`make test` installs them when run as root)")
    return None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromedriver() -> str | None:
    return shutil.which("chromedriver")


def console_problems(driver) -> list[str]:
    """Browser console messages that mean a broken page: CSP violations, script errors, 404s."""
    bad = []
    for entry in driver.get_log("browser"):
        msg = entry.get("message", "")
        if entry.get("level") == "SEVERE" or re.search(r"Content Security Policy|Refused to", msg):
            if "favicon.ico" in msg or "/topics/%3Cimg" in msg:
                continue
            bad.append(msg)
    return bad
