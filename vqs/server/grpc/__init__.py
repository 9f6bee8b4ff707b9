"""The gRPC front: ``vqs serve --grpc-port PORT`` (the ``grpc`` extra).

Services of the ``vqs.v1`` package (proto/vqs/v1/vqs.proto; the generated
code is in gen/, ``make grpc-proto``): Topics, Records (Produce,
ProduceStream, Fetch, Subscribe), Groups, Queues, ShareGroups (share.py),
plus the standard health
service and server reflection. It shares the HTTP server's broker, tokens and
TLS settings (front.py runs it; errors.py maps errors to status codes).

Modules here import grpc at their top: only ``require_grpc`` and front.py
may be imported without the extra.
"""

from __future__ import annotations

EXTRA_HINT = ("--grpc-port needs the grpc extra: pip install 'vqs[grpc]' "
              "(grpcio, protobuf, grpcio-health-checking, grpcio-reflection)")


def require_grpc() -> None:
    """Raise ImportError with what to install when the grpc extra is missing."""
    try:
        import grpc  # noqa: F401
        import grpc_health.v1.health  # noqa: F401
        import grpc_reflection.v1alpha.reflection  # noqa: F401
        from google import protobuf  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{EXTRA_HINT} ({e})") from None
