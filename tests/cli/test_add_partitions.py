"""``vqs topic add-partitions`` and ``vqs.Client.create_partitions`` (REST
``POST /topics/{t}/partitions``): a server URL and a data directory."""

from __future__ import annotations

import json

import httpx
import pytest
from cli_helpers import run_vqs as vqs

import vqs as vqs_lib
from vqs.errors import ConfigError, TopicDoesNotExist


def test_add_partitions_via_url_and_data_dir(srv, tmp_path):
    u = ["--url", srv.url]
    assert vqs("topic", "create", "grown", "-p", "2", *u).returncode == 0
    p = vqs("topic", "add-partitions", "grown", "-p", "5", *u)
    assert p.returncode == 0, p.stderr
    assert json.loads(vqs("topic", "describe", "grown", "--json", *u).stdout)["partitions"] == 5
    p = vqs("topic", "add-partitions", "grown", "-p", "3", *u)
    assert p.returncode != 0 and b"only grow" in p.stderr
    d = str(tmp_path / "data")
    assert vqs("topic", "create", "t", "--data-dir", d).returncode == 0
    assert vqs("topic", "add-partitions", "t", "-p", "3", "--data-dir", d).returncode == 0
    assert json.loads(vqs("topic", "describe", "t", "--json", "--data-dir", d).stdout)["partitions"] == 3


def test_client_create_partitions_and_the_server_limits(srv):
    with vqs_lib.Client(srv.url) as c:
        c.create_topic("limits", partitions=1)
        t = c.create_partitions("limits", 4)
        assert t.partitions == 4 and t.end_offsets() == [0, 0, 0, 0]
        with pytest.raises(ConfigError):
            c.create_partitions("limits", 4)
        with pytest.raises(TopicDoesNotExist):
            c.create_partitions("nosuch", 4)
    r = httpx.post(f"{srv.url}/topics/limits/partitions", json={"partitions": 257})
    assert r.status_code == 400 and "max_partitions_per_topic" in r.text
    r = httpx.post(f"{srv.url}/topics/limits/partitions", json={"partitions": 5, "extra": 1})
    assert r.status_code in (400, 422)


def test_async_client_create_partitions(srv):
    import asyncio

    async def main():
        async with vqs_lib.AsyncClient(srv.url) as c:
            await c.create_topic("agrown", partitions=1)
            t = await c.create_partitions("agrown", 3)
            assert t.partitions == 3 and await t.end_offsets() == [0, 0, 0]
            with pytest.raises(ConfigError):
                await c.create_partitions("agrown", 2)

    asyncio.run(main())
