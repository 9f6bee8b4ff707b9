"""Shared test helpers (kept small: fixtures every test package may use)."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def child_env():
    """Environment for child Python processes: the repo on sys.path, unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def python():
    return sys.executable
