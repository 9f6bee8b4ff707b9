"""``vqs serve`` with one extra route for bench/http_bench.py: ``GET /bench/noop``.

    python bench/_http_bench_server.py [serve options]   (the options of ``python -m vqs.server``)

Runs the real server (``vqs.server.run.main``: the same settings, uvicorn
config, lifespan, broker and middleware) with the app it builds wrapped in one
outermost ASGI layer that answers ``/bench/noop`` with a fixed 12-byte JSON
body and passes every other request through untouched. A ``POST`` to it reads
the whole request body first (``receive`` until ``more_body`` is false), as
any route that takes a body must: the floor for a request that carries one
(``noop-post`` in the bench sends it the produce's own body). The noop is the floor
of this server: the same process, event loop, HTTP parser and uvicorn settings
as the routes it is compared with, and none of the app's work. Wrapping from
here (rather than a route inside vqs) keeps a bench-only route out of the
product and works the same for any tree the bench measures (``--base-tree``).
"""

from __future__ import annotations

import sys

_BODY = b'{"ok":true}\n'
_START = {"type": "http.response.start", "status": 200,
          "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(_BODY)).encode())]}
_END = {"type": "http.response.body", "body": _BODY}


class NoopFront:
    """The app, behind a layer that answers ``/bench/noop`` itself."""

    def __init__(self, app):
        self.app = app
        self.state = app.state  # vqs.server.run reads app.state.ctx

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/bench/noop":
            if scope["method"] == "POST":
                while (await receive()).get("more_body"):
                    pass
            await send(_START)
            await send(_END)
            return
        await self.app(scope, receive, send)


def main() -> None:
    import vqs.server.app as app_module
    from vqs.server.run import main as serve_main

    build = app_module.create_app
    app_module.create_app = lambda *a, **k: NoopFront(build(*a, **k))  # run.py imports it at call time
    serve_main(sys.argv[1:])


if __name__ == "__main__":
    main()
