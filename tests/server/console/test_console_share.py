"""The console's share-group pages over plain HTTP (httpx against the console tests' real
`vqs serve`): the numbers REST's describe gives, markup in group ids kept text and
percent-encoded in links, the login required. The browser test of the same pages is in
test_console_browser.py."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import quote

import httpx
import pytest
from console_helpers import TOKEN


def _cells(html: str, row_name: str, cls: str) -> str:
    row = re.search(r'<tr data-name="' + re.escape(row_name) + r'">(.*?)</tr>', html, re.S)
    assert row, f"no row {row_name!r}"
    return unescape(re.search(r'<td class="[^"]*\b' + cls + r'\b[^"]*">(.*?)</td>', row.group(1), re.S).group(1))


def stable(read_api, read_page, tries: int = 20):
    """The page read between two equal API reads (a lock may end meanwhile: then read again)."""
    for _ in range(tries):
        before = read_api()
        page = read_page()
        if read_api() == before:
            return before, page
    raise AssertionError("the share group kept changing")


def test_share_groups_pages_show_the_apis_numbers(api, share_seeded):
    g, topic = share_seeded["group"], share_seeded["topic"]

    def describe():
        d = api.get(f"/share-groups/{g}").json()
        return d["partitions"], len(d["members"])

    (parts, members), html = stable(describe, lambda: api.get("/console/share-groups").text)
    acquired, available = sum(p["acquired"] for p in parts), sum(p["available"] for p in parts)
    assert acquired + available == 12  # nothing settled
    assert _cells(html, g, "acquired") == str(acquired) and _cells(html, g, "available") == str(available)
    assert _cells(html, g, "in-flight") == "12" and _cells(html, g, "members") == str(members)
    hist = {}
    for p in parts:
        for k, v in p["delivery_counts"].items():
            hist[k] = hist.get(k, 0) + v
    assert hist == {"1": 10, "2": 2}
    row = re.search(r'<tr data-name="pickers">(.*?)</tr>', html, re.S).group(1)
    bars = dict(re.findall(r'data-count="(\d+)" data-records="(\d+)"', row))
    assert bars == {"1": "10", "2": "2", "3": "0", "4": "0", "5": "0"}  # 1 to the delivery limit (5)

    (parts, _m), html = stable(describe, lambda: api.get(f"/console/share-groups/{g}").text)
    assert api.get(f"/console/share-groups/{g}").status_code == 200
    starts = re.findall(r'<td class="num start">(\d+)</td>', html)
    assert starts == [str(p["start_offset"]) for p in parts] == ["0", "0"]
    assert re.findall(r'<td class="num acquired">(\d+)</td>', html) == [str(p["acquired"]) for p in parts]
    assert 'id="share-histogram"' in html and "delivery limit" in html

    page = api.get(f"/console/topics/{topic}").text  # the topic's own share groups
    assert 'id="topic-share-groups"' in page and '<tr data-name="pickers">' in page
    assert '<tr data-name="pickers">' in api.get("/console/share-groups", params={"topic": topic}).text
    assert '<tr data-name="pickers">' not in api.get("/console/share-groups", params={"topic": "orders"}).text


def test_markup_in_a_share_group_id_stays_text(api, share_seeded, console_server):
    name = share_seeded["xss_group"]
    for path in ("/console/share-groups", f"/console/share-groups/{quote(name, safe='')}",
                 f"/console/topics/{share_seeded['topic']}"):
        r = api.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert name not in r.text and "<img" not in r.text, path  # never as markup
        assert "&lt;img src=x onerror=alert(1)&gt;" in r.text, path  # but shown, as text
        assert console_server.data_dir not in r.text
    listing = api.get("/console/share-groups").text
    assert f'href="/console/share-groups/{quote(name, safe="")}"' in listing  # one path segment
    r = api.get("/console/share-groups/%3Cscript%3Ealert(1)%3C%2Fscript%3E")  # unknown: an error page
    assert r.status_code == 404 and "<script>alert" not in r.text and "&lt;script&gt;alert" in r.text
    assert api.get("/console/share-groups/no-such-group").status_code == 404


def test_share_group_pages_need_the_login(console_server, share_seeded):
    with httpx.Client(base_url=console_server.url, timeout=30) as c:
        for path in ("/console/share-groups", "/console/share-groups/pickers"):
            r = c.get(path)
            assert r.status_code == 303 and r.headers["location"] == "/console/login", path
            assert "pickers" not in r.text
        r = c.get("/console/share-groups/pickers", headers={"Authorization": "Bearer not-the-token"})
        assert r.status_code in (303, 401, 403) and "pickers" not in r.text


def test_consumer_group_links_are_one_path_segment(api, console_server):
    """Kafka and gRPC take any group id: a consumer group's links, lag chart and reset form
    name it as one encoded path segment, so '%76ictim' never stands for 'victim' and a name
    with '/' or '#' never points at another page."""
    grpc = pytest.importorskip("grpc", reason="the grpc extra commits offsets under any group id")
    from vqs.server.grpc.gen import vqs_pb2 as pb
    from vqs.server.grpc.gen import vqs_pb2_grpc as pbg

    md = (("authorization", f"Bearer {TOKEN}"),)
    api.post("/topics", json={"name": "linked", "partitions": 1}).raise_for_status()
    names = ["%76ictim", "x/../../topics/linked/delete#", "a#frag", "a?q=1"]
    with grpc.insecure_channel(console_server.grpc_target) as ch:
        for g in names:
            pbg.GroupsStub(ch).Commit(pb.CommitRequest(group=g, offsets=[
                pb.PartitionOffset(topic="linked", partition=0, offset=0)]), metadata=md)
    listing = api.get("/console/groups").text
    for g in names:
        seg = quote(g, safe="")
        assert f'href="/console/groups/{seg}"' in listing, g
        page = api.get(f"/console/groups/{seg}")
        assert page.status_code == 200, (g, page.text[:300])
        assert f'action="/console/groups/{seg}/reset"' in page.text
        assert f'data-src="/console/api/groups/{seg}/lag"' in page.text
    assert 'href="/console/groups/%2576ictim"' in api.get("/console/topics/linked").text
