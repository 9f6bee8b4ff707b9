"""The console's safety over plain HTTP (httpx against a real `vqs serve`): login and
its cookie, CSRF on every mutation, the response headers, no paths on pages,
/docs without a CDN. The browser tests (test_console_browser.py) cover the same
pages as a user sees them."""

from __future__ import annotations

import re

import httpx
import pytest
from console_helpers import AUTH, TOKEN


@pytest.fixture
def session(console_server, seeded):
    """A logged-in console session (cookie) and its CSRF token."""
    with httpx.Client(base_url=console_server.url, timeout=30) as c:
        r = c.post("/console/login", data={"token": TOKEN})
        assert r.status_code == 303 and r.headers["location"] == "/console"
        page = c.get("/console/queues/jobs").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        yield c, csrf


def test_the_console_needs_the_apis_token(console_server, seeded):
    with httpx.Client(base_url=console_server.url, timeout=30) as c:
        r = c.get("/console/topics")
        assert r.status_code == 303 and r.headers["location"] == "/console/login"
        r = c.get("/console/api/overview")
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = c.post("/console/login", data={"token": "not-the-token"})
        assert r.status_code == 401 and "vqs_console" not in r.headers.get("set-cookie", "")
        assert c.get("/console/topics", headers=AUTH).status_code == 200  # a script with the bearer token
        r = c.post("/console/login", data={"token": TOKEN})
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        assert c.get("/console/topics").status_code == 200
        # the cookie is not a credential for the API
        assert c.get("/topics").status_code == 401
        csrf = re.search(r'name="csrf" value="([^"]+)"', c.get("/console").text).group(1)
        assert c.post("/console/logout", data={"csrf": csrf}).status_code == 303
        assert c.get("/console/topics").status_code == 303  # the session ended


def test_a_form_before_login_is_read_only_to_a_small_bound(console_server):
    """The login and logout forms are read before the request is authenticated: a client
    without credentials gets 413 past 16 KiB (the server reads no more of it), not the
    server's max_body_bytes (64 MiB) held for it."""
    with httpx.Client(base_url=console_server.url, timeout=30) as c:
        for path in ("/console/login", "/console/logout"):
            r = c.post(path, data={"token": "x" * (1 << 20)})
            assert r.status_code == 413 and "at most 16384 bytes" in r.text, (path, r.status_code)
        r = c.post("/console/login", data={"token": "wrong", "pad": "p" * (15 << 10)})
        assert r.status_code == 401  # a form within it is read as before


def test_pages_carry_a_strict_content_security_policy(session, console_server):
    c, _ = session
    for path in ("/console", "/console/topics/orders", "/console/queues/jobs", "/console/about"):
        r = c.get(path)
        assert r.status_code == 200, path
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
        assert "<script>" not in r.text  # every script is a file of /console/static
        assert console_server.data_dir not in r.text and "Traceback" not in r.text


def test_reset_offsets_needs_the_csrf_token_and_a_confirmation(session, api):
    c, csrf = session
    api.post("/groups/csrf-group/offsets", json={"offsets": [{"topic": "orders", "partition": 0, "offset": 4}]})
    form = {"topic": "orders", "to": "earliest", "value": "", "offsets": "0:0,1:0", "confirm": "yes"}
    for bad in ({}, {"csrf": "forged"}, {"csrf": ""}):
        r = c.post("/console/groups/csrf-group/reset", data={**form, **bad})
        assert r.status_code == 403 and "CSRF" in r.text
    # from another client (no session cookie) with a token it copied
    r = httpx.post(str(c.base_url) + "/console/groups/csrf-group/reset", data={**form, "csrf": csrf}, headers=AUTH)
    assert r.status_code == 403
    assert api.get("/groups/csrf-group").json()["partitions"][0]["committed"] == 4
    r = c.post("/console/groups/csrf-group/reset", data={**form, "csrf": csrf, "confirm": ""})
    assert r.status_code == 200 and "confirm-button" in r.text  # the preview: nothing committed yet
    assert api.get("/groups/csrf-group").json()["partitions"][0]["committed"] == 4
    r = c.post("/console/groups/csrf-group/reset", data={**form, "csrf": csrf})
    assert r.status_code == 303
    assert [p["committed"] for p in api.get("/groups/csrf-group").json()["partitions"]] == [0, 0]


def test_purge_delete_and_send_need_the_csrf_token(session, api):
    c, csrf = session
    api.post("/queues", json={"name": "csrf-q"}).raise_for_status()
    api.post("/queues/csrf-q/messages", json={"messages": [{"body": "keep me"}]}).raise_for_status()
    api.post("/topics", json={"name": "csrf-t"}).raise_for_status()
    for path, data in (("/console/queues/csrf-q/purge", {"confirm": "yes"}),
                       ("/console/queues/csrf-q/send", {"body": "forged"}),
                       ("/console/topics/csrf-t/delete", {"confirm": "yes"}),
                       ("/console/topics", {"name": "forged-topic"})):
        assert c.post(path, data=data).status_code == 403, path
        assert c.post(path, data={**data, "csrf": csrf[:-1]}).status_code == 403, path
    assert api.get("/queues/csrf-q").json()["attributes"]["ApproximateNumberOfMessages"] == "1"
    assert "csrf-t" in api.get("/topics").json()["topics"]
    assert "forged-topic" not in api.get("/topics").json()["topics"]
    assert c.post("/console/queues/csrf-q/purge", data={"csrf": csrf, "confirm": "yes"}).status_code == 303
    assert api.get("/queues/csrf-q").json()["attributes"]["ApproximateNumberOfMessages"] == "0"
    assert c.post("/console/topics/csrf-t/delete", data={"csrf": csrf, "confirm": "yes"}).status_code == 303
    assert "csrf-t" not in api.get("/topics").json()["topics"]


def test_create_a_compacted_topic(session, api):
    c, csrf = session
    r = c.post("/console/topics", data={"csrf": csrf, "name": "console-compacted", "partitions": "1",
                                        "cleanup_policy": "compact"})
    assert r.status_code == 303
    assert api.get("/topics/console-compacted").json()["config"]["cleanup_policy"] == "compact"
    r = c.post("/console/topics", data={"csrf": csrf, "name": "console-bad", "cleanup_policy": "shred"})
    assert "console-bad" not in api.get("/topics").json()["topics"]


def test_a_topics_own_settings_change_from_its_page(session, api):
    """The settings form of a topic's page: its own settings become the form's (an empty field is
    the server's default), as PATCH with replace; a refused one changes nothing and says why."""
    c, csrf = session
    api.post("/topics", json={"name": "console-settings", "retention_ms": 3_600_000}).raise_for_status()
    page = c.get("/console/topics/console-settings").text
    assert 'id="topic-settings-form"' in page and 'name="flush"' in page and 'value="3600000"' in page
    form = {"csrf": csrf, "retention_ms": "", "cleanup_policy": "compact", "min_cleanable_dirty_ratio": "0.2",
            "flush": "always", "max_message_bytes": "2048"}
    r = c.post("/console/topics/console-settings/settings", data=form)
    assert r.status_code == 303, r.text
    cfg = api.get("/topics/console-settings").json()["config"]
    assert (cfg["cleanup_policy"], cfg["min_cleanable_dirty_ratio"], cfg["flush"], cfg["max_message_bytes"]) == (
        "compact", 0.2, "always", 2048)
    assert cfg["retention_ms"] is None  # emptied: the server's default again
    for bad in ({"segment_bytes": "tiny"}, {"flush": "sometimes"}, {"segment_bytes": "100"},
                {"min_cleanable_dirty_ratio": "most"}):
        r = c.post("/console/topics/console-settings/settings", data={**form, **bad})
        assert r.status_code == 400 and next(iter(bad)) in r.text, (bad, r.status_code)
    assert api.get("/topics/console-settings").json()["config"]["flush"] == "always"  # unchanged
    r = c.post("/console/topics/console-settings/settings", data={"retention_ms": "1"})  # no CSRF token
    assert r.status_code == 403 and api.get("/topics/console-settings").json()["config"]["retention_ms"] is None


def test_errors_are_pages_without_paths(session, console_server):
    c, _ = session
    for path in ("/console/topics/no-such-topic", "/console/queues/no-such-queue", "/console/groups/nobody",
                 "/console/topics/orders?partition=99", "/console/topics/orders?offset=x"):
        r = c.get(path)
        assert 400 <= r.status_code < 500, path
        assert r.headers["content-type"].startswith("text/html")
        assert console_server.data_dir not in r.text and "Traceback" not in r.text


def test_docs_work_offline(console_server):
    r = httpx.get(console_server.url + "/docs")
    assert r.status_code == 200
    srcs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert srcs and all(s.startswith("/") for s in srcs), srcs  # nothing from another host
    for s in srcs:
        assert httpx.get(console_server.url + s).status_code == 200, s


def test_console_refused_off_loopback_without_credentials():
    """Without tokens the console (like the API) is for loopback; a peer elsewhere
    (possible only behind a proxy: the server refuses to listen off loopback
    without credentials unless --insecure) is refused."""
    from starlette.requests import Request

    from vqs.server.console.security import Refused, Sessions
    from vqs.server.settings import Settings

    def request(host):
        return Request({"type": "http", "method": "GET", "path": "/console", "query_string": b"",
                        "headers": [], "client": (host, 5000)})

    open_ = Sessions(Settings())
    with pytest.raises(Refused) as e:
        open_.session(request("192.0.2.7"))
    assert e.value.status == 403
    for host in ("127.0.0.1", "::1"):
        assert open_.session(request(host))[0] is not None
    assert Sessions(Settings(insecure=True)).session(request("192.0.2.7"))[0] is not None
    with pytest.raises(Refused) as e:  # with tokens: anyone may try, with the token
        Sessions(Settings(tokens=["t"])).session(request("192.0.2.7"))
    assert e.value.status == 401


def test_the_overview_lists_the_listeners_that_serve(tmp_path):
    from vqs_server_proc import ServerProcess, free_port

    pytest.importorskip("grpc")
    kafka, grpc_port = free_port(), free_port()
    s = ServerProcess(tmp_path / "data", "--kafka-port", str(kafka), "--grpc-port", str(grpc_port)).start()
    try:
        page = httpx.get(s.url + "/console", timeout=30).text
        assert "not in this version" not in page
        assert f"127.0.0.1:{kafka}" in page and f"127.0.0.1:{grpc_port}" in page and "gRPC" in page
    finally:
        assert s.stop() == 0, s.log()
    plain = ServerProcess(tmp_path / "plain").start()  # (the console tests' server has gRPC on)
    try:
        page = httpx.get(plain.url + "/console", timeout=30).text
    finally:
        assert plain.stop() == 0, plain.log()
    assert "off (start the server with --kafka-port PORT)" in page
    assert "off (start the server with --grpc-port PORT)" in page


def test_the_about_page_shows_settings_in_words(console_server):
    page = httpx.get(console_server.url + "/console/about", headers=AUTH, timeout=30).text
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert cells and not {"None", "False", "True"} & {c.strip() for c in cells}


def test_a_topics_settings_are_shown_in_words(console_server, seeded, api):
    """No None in a topic's configuration table: what a null means, and numbers readable."""
    def table(topic):
        page = httpx.get(console_server.url + f"/console/topics/{topic}", headers=AUTH, timeout=30).text
        part = page[page.index('id="topic-config"'):]
        part = part[:part.index("</table>")]
        return dict(re.findall(r"<th>([^<]*)</th><td>([^<]*)", part))

    rows = table(seeded["topic"])
    assert rows and not {"None", "False", "True"} & {v.strip() for v in rows.values()}, rows
    assert rows["retention_ms"].startswith("unlimited") and rows["compression"].strip() == "none"
    assert rows["max_message_bytes"].startswith("server limit: 1048576")
    api.post("/topics", json={"name": "words", "retention_ms": 7_200_000, "max_message_bytes": 2048}
             ).raise_for_status()
    rows = table("words")
    assert rows["retention_ms"].strip() == "7200000 (2h 0m)" and rows["max_message_bytes"].strip() == "2048 (2.0 KiB)"


def test_queue_times_are_shown_as_dates(console_server, seeded):
    page = httpx.get(console_server.url + "/console/queues/jobs", headers=AUTH, timeout=30).text
    row = re.search(r"<th>CreatedTimestamp</th><td>([^<]*)</td>", page)
    assert row and re.match(r"\d{4}-\d\d-\d\d", row.group(1)), row


def test_recent_errors_show_the_requested_path(console_server, api):
    """A refused request is listed with the URL path it asked for (the client's words, escaped);
    the detail never carries a path of the server's."""
    name = "no-such-topic-for-recent-errors"
    assert api.get(f"/topics/{name}/messages", params={"offset": 0}).status_code == 404
    page = httpx.get(console_server.url + "/console", headers=AUTH, timeout=30).text
    table = page[page.index('id="recent-errors"'):]
    assert f"404 GET /topics/{name}/messages" in table
    assert console_server.data_dir not in page


def test_a_browser_page_is_bounded_by_its_headers_and_bytes(api):
    """A record's headers past 50 are counted, not shown; rows stop once 4 MiB of keys, values
    and headers are on the page (at least one), and "newer" goes on from there. 200 records of
    10,000 headers made a 308 MB page."""
    api.post("/topics", json={"name": "wide", "partitions": 1}).raise_for_status()
    heavy = {f"h{i}": "v" * 50_000 for i in range(100)}  # 5 MB of headers a record
    msgs = [{"value": "x", "headers": heavy, "partition": 0} for _ in range(3)]
    msgs.append({"value": "y", "headers": {f"n{i}": "" for i in range(10_000)}, "partition": 0})
    api.post("/topics/wide/messages", json={"messages": msgs}).raise_for_status()
    page = api.get("/console/topics/wide", params={"offset": 0, "limit": 200})
    assert page.status_code == 200 and len(page.content) < 6 << 20, len(page.content)
    assert "1 of 4 records shown" in page.text and "and 50 more headers" in page.text
    page = api.get("/console/topics/wide", params={"offset": 3, "limit": 200})
    assert len(page.content) < 1 << 20 and "and 9950 more headers" in page.text
