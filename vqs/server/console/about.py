"""The About page (configuration in effect, version, links), the login form and logout.

Invariants: the configuration is shown without secrets (tokens and SigV4
secrets as counts; access key ids are not secret and are listed) and without
server paths (the data directory by its name); a failed login says only that
the token is not valid, and takes as long as a good one (the comparison is
constant-time over every configured token).
"""

from __future__ import annotations

import os
from dataclasses import fields

from fastapi import APIRouter, Request

from .base import PREAUTH_FORM_BYTES, ConsoleRoute, enter, read_form, state
from .security import COOKIE, set_cookie
from .views import page, redirect


def settings_rows(settings) -> list[tuple[str, str]]:
    rows = []
    for f in fields(settings):
        v = getattr(settings, f.name)
        if f.name == "tokens":
            v = f"{len(v)} configured (hidden)" if v else "none (the API and the console are open)"
        elif f.name == "kafka_users":
            v = (f"{len(v)} user(s): " + ", ".join(sorted(v)) + " (passwords hidden)") if v else "none (tokens)"
        elif f.name == "sigv4_keys":
            v = (f"{len(v)} access key(s): " + ", ".join(sorted(v)) + " (secrets hidden)") if v else "none"
        elif f.name == "data_dir":
            v = os.path.basename(str(v).rstrip(os.sep)) + " (name only)"
        elif f.name.endswith("_port") and v == 0:
            v = "off"
        elif isinstance(v, bool):
            v = "yes" if v else "no"
        elif v is None or v == "" or v == () or v == []:
            v = "-"
        elif isinstance(v, (list, tuple)):
            v = ", ".join(map(str, v))
        rows.append((f.name, str(v)))
    return rows


def about_routes() -> APIRouter:
    r = APIRouter(route_class=ConsoleRoute)

    @r.get("/console/about")
    async def about(request: Request):
        session, new = enter(request)
        ctx = state(request).ctx
        return page(request, session, new, "about.html", version=request.app.version,
                    settings=settings_rows(ctx.settings))

    @r.get("/console/login")
    async def login_form(request: Request):
        return page(request, None, False, "login.html", failed=False)

    @r.post("/console/login")
    async def login(request: Request):
        st = state(request)
        form = await read_form(request, PREAUTH_FORM_BYTES)
        token = form.get("token")
        if not st.sessions.login_required:
            return redirect(request, None, False, "/console")
        if not isinstance(token, str) or not st.sessions.token_ok(token):
            st.ctx.auth_failures.failed("console", request.client, "login (POST /console/login)")
            return page(request, None, False, "login.html", status=401, failed=True)
        session = st.sessions.new(authenticated=True)
        resp = redirect(request, None, False, "/console")
        set_cookie(resp, request, session)
        return resp

    @r.post("/console/logout")
    async def logout(request: Request):
        st = state(request)
        form = await read_form(request, PREAUTH_FORM_BYTES)
        s = st.sessions.get(request.cookies.get(COOKIE))
        given = form.get("csrf")
        st.sessions.check_csrf(s, given if isinstance(given, str) else None)
        st.sessions.end(s.sid)
        resp = redirect(request, None, False, "/console/login" if st.sessions.login_required else "/console")
        resp.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")
        return resp

    return r
