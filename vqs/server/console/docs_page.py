"""``/docs``: Swagger UI served from the wheel (no CDN), so the API docs work offline.

The page is FastAPI's own (``get_swagger_ui_html``) pointed at the vendored
swagger-ui-dist files under /console/static/vendor/swagger-ui. It keeps
FastAPI's small inline initialisation script, so it does not get the
console's Content-Security-Policy.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html

_STATIC = "/console/static/vendor/swagger-ui/"


def docs_routes(title: str, openapi_url: str = "/openapi.json") -> APIRouter:
    r = APIRouter()

    @r.get("/docs", include_in_schema=False)
    async def docs():
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{title} - API docs",
                                   swagger_js_url=_STATIC + "swagger-ui-bundle.js",
                                   swagger_css_url=_STATIC + "swagger-ui.css",
                                   swagger_favicon_url=_STATIC + "favicon-32x32.png",
                                   oauth2_redirect_url="/docs/oauth2-redirect")

    @r.get("/docs/oauth2-redirect", include_in_schema=False)
    async def oauth2_redirect():
        return get_swagger_ui_oauth2_redirect_html()

    return r
