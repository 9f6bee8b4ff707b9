"""REST routes for queues (filled in below)."""

from __future__ import annotations


def add_queue_routes(r, ctx, broker) -> None:
    pass
