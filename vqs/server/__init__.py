"""The VQS server: REST API, SQS-compatible API, metrics (``pip install vqs[server]``).

Import-light: ``create_app`` and ``serve`` load FastAPI and uvicorn only when called.
"""

from __future__ import annotations

from .settings import DEFAULT_PORT, Settings, load_settings

__all__ = ["DEFAULT_PORT", "Settings", "create_app", "load_settings", "serve"]


def create_app(settings: Settings | None = None, *, broker=None, pre_auth=None, in_flight=None):
    from .app import create_app as _create

    return _create(settings, broker=broker, pre_auth=pre_auth, in_flight=in_flight)


def serve(settings: Settings) -> None:
    from .run import serve as _serve

    _serve(settings)
