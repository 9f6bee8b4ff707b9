"""The console in a real browser (headless Chromium) against a real `vqs serve`.

Every page loads and shows the API's numbers; the charts draw and move when
messages flow; the message browser pages both ways; offset resets and purges
go through their confirmation pages; markup in message content, headers,
attributes, tags and request paths stays text in every view; no page breaks
its Content-Security-Policy.
"""

from __future__ import annotations

import time

import pytest
from console_helpers import XSS, console_problems

pytest.importorskip("selenium")

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


def wait(driver, cond, timeout=15.0):
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: cond(d))


def no_alert(driver) -> None:
    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        return
    driver.switch_to.alert.dismiss()
    raise AssertionError(f"an alert ran: {text!r}")


def open_page(driver, url: str) -> str:
    driver.get(url)
    no_alert(driver)
    assert console_problems(driver) == []
    assert driver.find_elements(By.CSS_SELECTOR, "img[src='x']") == []
    return driver.find_element(By.TAG_NAME, "body").text


def cell_text(driver, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def test_every_page_shows_the_apis_numbers(logged_in, console_server, api, seeded):
    d, url = logged_in, console_server.url
    body = open_page(d, url + "/console")
    assert d.find_element(By.ID, "total-topics").text == str(len(api.get("/topics").json()["topics"]))
    assert d.find_element(By.ID, "total-queues").text == str(len(api.get("/queues").json()["queues"]))
    assert d.find_element(By.ID, "total-groups").text == str(len(api.get("/groups").json()["groups"]))
    assert d.find_element(By.ID, "version").text == api.get("/openapi.json").json()["info"]["version"]
    assert d.find_element(By.ID, "data-dir").text == "data"  # the name only: no server path on a page
    assert console_server.data_dir not in d.page_source
    assert "Kafka protocol" in body and "SQS API" in body

    open_page(d, url + "/console/topics")
    desc = api.get("/topics/orders").json()
    row = d.find_element(By.CSS_SELECTOR, "#topics tr[data-name='orders']")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == str(desc["partitions"])
    assert cells[3] == str(sum(p["end_offset"] for p in desc["partition_info"]))

    open_page(d, url + "/console/topics/orders")
    ends = [int(x) for x in cell_text(d, "#partitions tbody td:nth-child(3)")]
    assert ends == [p["end_offset"] for p in desc["partition_info"]]

    open_page(d, url + "/console/groups")
    lag = api.get("/groups/billing").json()
    row = next(r for r in d.find_elements(By.CSS_SELECTOR, "#groups tbody tr") if r.text.startswith("billing"))
    assert row.find_element(By.CSS_SELECTOR, "td.lag").text == str(lag["total_lag"])
    open_page(d, url + "/console/groups/billing")
    assert d.find_element(By.ID, "total-lag").text == str(lag["total_lag"])
    assert cell_text(d, "#group-partitions td.lag") == [str(p["lag"]) for p in lag["partitions"]]

    open_page(d, url + "/console/queues")
    attrs = api.get("/queues/jobs").json()["attributes"]
    row = d.find_element(By.CSS_SELECTOR, "#queues tr[data-name='jobs']")
    assert row.find_element(By.CSS_SELECTOR, "td.visible").text == attrs["ApproximateNumberOfMessages"]
    open_page(d, url + "/console/queues/jobs")
    assert d.find_element(By.ID, "q-visible").text == attrs["ApproximateNumberOfMessages"]
    assert len(d.find_elements(By.CSS_SELECTOR, "#peeked tr.message")) == int(attrs["ApproximateNumberOfMessages"])
    # peeking received nothing
    assert api.get("/queues/jobs").json()["attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"

    body = open_page(d, url + "/console/about")
    assert "1 configured (hidden)" in body and "console-test-token" not in d.page_source
    d.find_element(By.ID, "link-docs").click()
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock"))  # Swagger UI, from the wheel
    assert any("/topics" in e.text for e in d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))


def _canvas(d, fig_id):
    return d.execute_script(
        "var c = document.querySelector('#' + arguments[0] + ' canvas'); if (!c) return null;"
        "var px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, ink = 0;"
        "for (var i = 3; i < px.length; i += 4) { if (px[i]) ink++; }"
        "return {url: c.toDataURL(), ink: ink};", fig_id)


def test_charts_draw_and_move_with_new_messages(logged_in, console_server, api, seeded):
    d = logged_in
    open_page(d, console_server.url + "/console")
    wait(d, lambda d: (_canvas(d, "chart-produce") or {}).get("ink", 0) > 0)
    wait(d, lambda d: int(d.find_element(By.ID, "chart-produce").get_attribute("data-points") or 0) >= 2)
    before = _canvas(d, "chart-produce")["url"]
    backlog0 = float(d.find_element(By.ID, "chart-backlog").get_attribute("data-last") or 0)

    def produce():
        api.post("/topics/orders/messages",
                 json={"messages": [{"value": f"burst-{i}", "partition": 1} for i in range(300)]}).raise_for_status()

    produce()
    # the produce rate shows the burst, the backlog (the group's lag) grows, the canvas redraws
    wait(d, lambda d: float(d.find_element(By.ID, "chart-produce").get_attribute("data-last") or 0) > 0
         or (produce() and False), timeout=20)
    wait(d, lambda d: float(d.find_element(By.ID, "chart-backlog").get_attribute("data-last") or 0) > backlog0)
    assert _canvas(d, "chart-produce")["url"] != before
    assert console_problems(d) == []


# Multiplies the overview's numbers into the hundreds of millions, as a busy server's backlog.
_BIG_NUMBERS = """(function () { var f = window.fetch; window.fetch = function (u, o) {
  return f(u, o).then(function (r) {
    if (String(u).indexOf("/console/api/overview") < 0) { return r; }
    return r.json().then(function (d) {
      ["produce", "consume", "backlog"].forEach(function (k) {
        d[k] = (d[k] || []).map(function (v, i) { return 123456789 + i * 1000000; }); });
      return new Response(JSON.stringify(d), {status: 200, headers: {"content-type": "application/json"}});
    }); }); }; })();"""


def test_chart_axes_fit_large_numbers(logged_in, console_server):
    """A y axis labelled in the hundreds of millions is drawn whole: nothing is cut at the canvas's
    left edge (a fixed-width axis cut '100,000,000' to '00,000')."""
    d = logged_in
    script = d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _BIG_NUMBERS})["identifier"]
    try:
        open_page(d, console_server.url + "/console")
        for fig in ("chart-produce", "chart-backlog"):
            def drawn(d, fig=fig):
                e = d.find_element(By.ID, fig)
                return float(e.get_attribute("data-last") or 0) > 1e8 and int(e.get_attribute("data-points") or 0) >= 2

            wait(d, drawn)
            edge = d.execute_script(
                "var c = document.querySelector('#' + arguments[0] + ' canvas');"
                "var px = c.getContext('2d').getImageData(0, 0, 3, c.height).data, ink = 0;"
                "for (var i = 3; i < px.length; i += 4) { if (px[i]) ink++; } return ink;", fig)
            assert edge == 0, f"{fig}: a label runs off the canvas's left edge"
    finally:
        d.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script})


def test_message_browser_pages_both_ways(logged_in, console_server, api, seeded):
    d = logged_in
    api.post("/topics", json={"name": "pages", "partitions": 1}).raise_for_status()
    api.post("/topics/pages/messages", json={"messages": [
        {"value": f'{{"n": {i}}}', "key": f"key-{i % 3}"} for i in range(35)]}).raise_for_status()
    open_page(d, console_server.url + "/console/topics/pages?partition=0&offset=0&limit=10")

    def offsets():  # read in one script: htmx may swap the table between two element reads
        return d.execute_script("return Array.from(document.querySelectorAll('#messages tr.message'))"
                                ".map(function (tr) { return Number(tr.dataset.offset); })")

    assert offsets() == list(range(10))
    assert d.find_elements(By.CSS_SELECTOR, "span#page-older")  # nothing older than the start
    for first in (10, 20, 30):
        d.find_element(By.ID, "page-newer").click()
        wait(d, lambda d, f=first: offsets()[:1] == [f])
    assert offsets() == list(range(30, 35))
    d.find_element(By.ID, "page-older").click()
    wait(d, lambda d: offsets()[:1] == [20])
    assert offsets() == list(range(20, 30))
    assert "offset=20" in d.current_url  # the page's address follows (back button, sharing)

    # pretty JSON, then hex
    Select(d.find_element(By.NAME, "format")).select_by_value("json")
    d.find_element(By.ID, "browse").click()
    wait(d, lambda d: '"n": 20' in d.execute_script(
        "var p = document.querySelector('#messages pre.val'); return p ? p.textContent : ''"))
    d.get(console_server.url + "/console/topics/pages?partition=0&offset=3&limit=1&format=hex")
    assert d.find_elements(By.CSS_SELECTOR, "#messages pre.val")[-1].text.startswith("00000000  7b 22 6e 22")

    # by key: only key-1's records, paged forward
    d.get(console_server.url + "/console/topics/pages?mode=key&key=key-1&partition=0&offset=0&limit=5")
    assert offsets() == [1, 4, 7, 10, 13]
    d.find_element(By.ID, "page-newer").click()
    wait(d, lambda d: offsets()[:1] == [16])
    d.find_element(By.ID, "page-older").click()
    wait(d, lambda d: offsets() == [1, 4, 7, 10, 13])

    # by timestamp: everything is newer than an hour ago; nothing after a minute from now
    d.get(console_server.url + "/console/topics/pages?mode=time&partition=0&limit=3&ts="
          + str(int(time.time() * 1000) - 3_600_000))
    assert offsets() == [0, 1, 2]
    d.get(console_server.url + "/console/topics/pages?mode=time&partition=0&limit=3&ts="
          + str(int(time.time() * 1000) + 60_000))
    assert offsets() == [] and "no record at or after" in d.find_element(By.ID, "browser-note").text


def test_reset_offsets_through_the_confirmation_page(logged_in, console_server, api, seeded):
    d = logged_in
    open_page(d, console_server.url + "/console/groups/billing")
    Select(d.find_element(By.NAME, "topic")).select_by_visible_text("orders")
    Select(d.find_element(By.NAME, "to")).select_by_value("earliest")
    d.find_element(By.ID, "reset").click()
    wait(d, lambda d: d.find_elements(By.ID, "confirm-button"))  # the click navigates: wait for the new page
    preview = cell_text(d, "#preview tbody td")
    assert preview[:4] == ["orders", "0", "5", "0"]
    assert api.get("/groups/billing").json()["partitions"][0]["committed"] == 5  # not yet
    d.find_element(By.ID, "confirm-button").click()
    wait(d, lambda d: "reset" in d.find_element(By.CSS_SELECTOR, ".flash").text)
    assert [p["committed"] for p in api.get("/groups/billing").json()["partitions"]] == [0, 0]
    assert cell_text(d, "#group-partitions td.committed") == ["0", "0"]

    Select(d.find_element(By.NAME, "to")).select_by_value("exact")
    d.find_element(By.NAME, "value").send_keys("2")
    d.find_element(By.ID, "reset").click()
    wait(d, lambda d: d.find_elements(By.ID, "confirm-button"))
    d.find_element(By.ID, "confirm-button").click()
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash"))
    assert [p["committed"] for p in api.get("/groups/billing").json()["partitions"]] == [2, 2]


def test_send_peek_and_purge_a_queue(logged_in, console_server, api, seeded):
    d = logged_in
    api.post("/queues", json={"name": "purge-me"}).raise_for_status()
    open_page(d, console_server.url + "/console/queues/purge-me")
    d.find_element(By.NAME, "body").send_keys("sent from the console")
    d.find_element(By.ID, "send").click()
    wait(d, lambda d: "Sent message" in d.find_element(By.CSS_SELECTOR, ".flash").text)
    assert "sent from the console" in d.find_element(By.ID, "peeked").text
    assert api.get("/queues/purge-me").json()["attributes"]["ApproximateNumberOfMessages"] == "1"
    d.find_element(By.ID, "purge").click()
    wait(d, lambda d: d.find_elements(By.ID, "confirm-button"))
    assert "Purge queue purge-me" in d.find_element(By.TAG_NAME, "h1").text
    assert api.get("/queues/purge-me").json()["attributes"]["ApproximateNumberOfMessages"] == "1"
    d.find_element(By.ID, "confirm-button").click()
    wait(d, lambda d: "purged" in d.find_element(By.CSS_SELECTOR, ".flash").text)
    assert api.get("/queues/purge-me").json()["attributes"]["ApproximateNumberOfMessages"] == "0"


def test_redrive_from_a_dead_letter_queue_shows_progress(logged_in, console_server, api, seeded):
    d = logged_in
    api.post("/queues", json={"name": "rd-dlq"}).raise_for_status()
    api.post("/queues", json={"name": "rd", "dead_letter_queue": "rd-dlq", "max_receive_count": 1}).raise_for_status()
    api.post("/queues/rd/messages", json={"messages": [{"body": f"m{i}"} for i in range(3)]}).raise_for_status()
    for _ in range(2):  # received twice without a delete: past max_receive_count, into the DLQ
        api.post("/queues/rd/receive", json={"max_messages": 10, "visibility_timeout": 0, "wait_seconds": 0})
    wait(d, lambda d: api.get("/queues/rd-dlq").json()["attributes"]["ApproximateNumberOfMessages"] == "3")
    open_page(d, console_server.url + "/console/queues/rd-dlq")
    d.find_element(By.ID, "redrive").click()
    wait(d, lambda d: d.find_elements(By.ID, "confirm-button"))
    d.find_element(By.ID, "confirm-button").click()
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#move-tasks tr.task"))
    wait(d, lambda d: "COMPLETED" in d.find_element(By.CSS_SELECTOR, "#move-tasks .status").text
         or d.refresh())  # the htmx poll updates a running task; a reload shows a finished one
    assert d.find_element(By.CSS_SELECTOR, "#move-tasks .moved").text == "3"
    assert api.get("/queues/rd").json()["attributes"]["ApproximateNumberOfMessages"] == "3"


def test_share_groups_show_their_records_in_flight(logged_in, console_server, api, share_seeded):
    d, url = logged_in, console_server.url
    g = share_seeded["group"]
    for _ in range(20):  # the page between two equal API reads (a lock may end meanwhile)
        before = api.get(f"/share-groups/{g}").json()["partitions"]
        open_page(d, url + "/console/share-groups")
        row = d.find_element(By.CSS_SELECTOR, f"#share-groups tr[data-name='{g}']")
        shown = (row.find_element(By.CSS_SELECTOR, "td.acquired").text,
                 row.find_element(By.CSS_SELECTOR, "td.available").text)
        if api.get(f"/share-groups/{g}").json()["partitions"] == before:
            break
    assert shown == (str(sum(p["acquired"] for p in before)), str(sum(p["available"] for p in before)))
    assert row.find_element(By.CSS_SELECTOR, "td.in-flight").text == "12"
    rects = row.find_elements(By.CSS_SELECTOR, "svg.hist rect")
    assert [r.get_attribute("data-records") for r in rects] == ["10", "2", "0", "0", "0"]
    heights = [r.size["height"] for r in rects]  # as drawn: the bars' heights follow the counts
    assert heights[0] > heights[1] > 0 and heights[2:] == [0, 0, 0]
    assert "1\u00d7 10 \u00b7 2\u00d7 2" in row.text.replace("\xa0", " ")  # the legend

    # the group whose id is markup: a link of one path segment, its page shows the id as text
    xss_row = next(r for r in d.find_elements(By.CSS_SELECTOR, "#share-groups tbody tr")
                   if r.find_element(By.TAG_NAME, "td").text == XSS[0])
    xss_row.find_element(By.TAG_NAME, "a").click()
    wait(d, lambda d: d.find_elements(By.ID, "share-partitions"))
    no_alert(d)
    assert d.find_element(By.ID, "group-name").text == XSS[0]
    assert d.find_elements(By.CSS_SELECTOR, "img[src='x']") == [] and console_problems(d) == []
    assert len(d.find_elements(By.CSS_SELECTOR, "#share-partitions tbody tr")) == 2
    assert d.find_element(By.ID, "in-flight").text == "12"
    assert d.execute_script("return document.querySelectorAll('script:not([src])').length") == 0

    open_page(d, url + f"/console/topics/{share_seeded['topic']}")
    names = [r.find_element(By.TAG_NAME, "td").text
             for r in d.find_elements(By.CSS_SELECTOR, "#topic-share-groups tbody tr")]
    assert sorted(names) == sorted([g, XSS[0]])
    no_alert(d)


@pytest.mark.parametrize("path", [
    "/console", "/console/topics/orders?partition=0&offset=0&format=text",
    "/console/topics/orders?partition=0&offset=0&format=json", "/console/topics/orders?partition=0&offset=0&format=hex",
    "/console/topics/orders?mode=key&key=xss-key&partition=0", "/console/queues/jobs", "/console/queues/jobs?format=json",
    "/console/queues",
])
def test_markup_in_data_stays_text(logged_in, console_server, seeded, path):
    d = logged_in
    body = open_page(d, console_server.url + path)
    no_alert(d)
    assert d.execute_script("return document.querySelectorAll('script:not([src])').length") == 0
    if "format=hex" not in path and path != "/console/queues":
        shown = [x for x in XSS if x in body]
        assert shown, f"neither XSS value is visible as text on {path}"


SHOTS = [("overview", "/console"), ("topics", "/console/topics"),
         ("topic", "/console/topics/orders?partition=0&offset=0&limit=8&format=json"),
         ("group", "/console/groups/billing"), ("queues", "/console/queues"), ("queue", "/console/queues/jobs")]


def test_screenshots_for_the_docs(logged_in, console_server, seeded, tmp_path, request):
    """The pictures of docs/console.md, taken here: written to docs/console/ when
    VQS_UPDATE_SCREENSHOTS=1 (then commit them), else to a temporary directory."""
    import importlib.util
    import os

    shots = list(SHOTS)
    if importlib.util.find_spec("grpc") is not None:  # share groups are made over gRPC
        request.getfixturevalue("share_seeded")
        shots.append(("share_group", "/console/share-groups/pickers"))
    d = logged_in
    out = tmp_path
    if os.environ.get("VQS_UPDATE_SCREENSHOTS") == "1":
        out = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "console")
        os.makedirs(out, exist_ok=True)
    d.set_window_size(1000, 1150)
    try:
        for name, path in shots:
            open_page(d, console_server.url + path)
            if name == "overview":
                wait(d, lambda d: int(d.find_element(By.ID, "chart-produce").get_attribute("data-points") or 0) >= 2)
            png = recompress_png(d.get_screenshot_as_png())
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 150_000, (name, len(png))
            with open(os.path.join(out, f"{name}.png"), "wb") as f:
                f.write(png)
    finally:
        d.set_window_size(1000, 900)


def recompress_png(data: bytes) -> bytes:
    """The same PNG with its image data deflated at level 9 (Chromium writes it fast, not small)."""
    import struct
    import zlib

    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IDAT":
            idat += body
        else:
            chunks.append((kind, body))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    out = [data[:8]]
    for kind, body in chunks:
        if kind == b"IEND":
            out.append(chunk(b"IDAT", zlib.compress(zlib.decompress(idat), 9)))
        out.append(chunk(kind, body))
    return b"".join(out)
