"""Certificates for the TLS tests, made with the ``openssl`` command (``needs_openssl`` skips a
test where it is missing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="needs the openssl command to make a certificate")

#: the names a test server's certificate holds (clients connect to 127.0.0.1 or localhost)
LOCAL_NAMES = "subjectAltName=DNS:localhost,IP:127.0.0.1"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def self_signed(d, name: str = "server") -> tuple[str, str]:
    """A self-signed certificate for localhost and 127.0.0.1 and its key, ``name``.pem and
    ``name``.key in directory ``d``: (certificate path, key path)."""
    cert, key = str(Path(d) / f"{name}.pem"), str(Path(d) / f"{name}.key")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
            "-subj", "/CN=localhost", "-addext", LOCAL_NAMES)
    return cert, key
