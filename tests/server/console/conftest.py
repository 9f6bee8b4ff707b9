"""Console fixtures: one real `vqs serve` with a token and some data, one headless Chromium.

The browser is Debian's chromium driven by selenium through chromedriver
(/usr/bin/chromium, /usr/bin/chromedriver; `make test` installs them when it
runs as root). Without them the browser tests skip saying why, unless
VQS_REQUIRE_BROWSER=1 (set by .ci/run), which turns the skip into a failure.
One browser serves the whole session (starting Chromium costs seconds).
"""

from __future__ import annotations

import importlib.util
import os

import httpx
import pytest

pytest.importorskip("jinja2")

from console_helpers import AUTH, TOKEN, XSS, browser_missing, chromedriver, chromium
from vqs_server_proc import ServerProcess, free_port


@pytest.fixture(scope="session")
def console_server(tmp_path_factory):
    """A server with a bearer token; its data is made by the tests through the REST API (and
    gRPC's share groups, whose group ids may hold markup, when the grpc extra is installed)."""
    d = tmp_path_factory.mktemp("vqs-console") / "data"
    args = ["--token", TOKEN]
    grpc_port = None
    if importlib.util.find_spec("grpc") is not None:
        grpc_port = free_port()
        args += ["--grpc-port", str(grpc_port)]
    s = ServerProcess(d, *args).start()
    s.grpc_target = None if grpc_port is None else f"127.0.0.1:{grpc_port}"
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


@pytest.fixture(scope="session")
def api(console_server):
    with httpx.Client(base_url=console_server.url, headers=AUTH, timeout=30) as c:
        yield c


@pytest.fixture(scope="session")
def seeded(api):
    """Topics, a group, queues (one with a dead-letter queue) holding the XSS values."""
    api.post("/topics", json={"name": "orders", "partitions": 2}).raise_for_status()
    msgs = [{"value": XSS[0], "key": "xss-key", "headers": {"h": XSS[1]}, "partition": 0},
            {"value": XSS[1], "key": XSS[0], "partition": 0},
            {"value": '{"id": 7, "note": "</script><script>alert(1)</script>"}', "key": "json", "partition": 0}]
    msgs += [{"value": f"order-{i}", "key": f"k{i % 5}", "partition": i % 2} for i in range(40)]
    api.post("/topics/orders/messages", json={"messages": msgs}).raise_for_status()
    api.post("/groups/billing/offsets", json={"offsets": [{"topic": "orders", "partition": 0, "offset": 5},
                                                           {"topic": "orders", "partition": 1, "offset": 3}]}
             ).raise_for_status()
    api.post("/queues", json={"name": "jobs-dlq"}).raise_for_status()
    api.post("/queues", json={"name": "jobs", "dead_letter_queue": "jobs-dlq", "max_receive_count": 1,
                              "tags": {"team": XSS[0]}}).raise_for_status()
    api.post("/queues/jobs/messages", json={"messages": [
        {"body": XSS[0], "attributes": {"a": XSS[1]}}, {"body": XSS[1]}, {"body": "plain job"}]}).raise_for_status()
    # a refused request whose path carries markup: it shows in the overview's recent errors
    api.get("/topics/" + XSS[0].replace(" ", "%20"))
    return {"topic": "orders", "group": "billing", "queue": "jobs", "dlq": "jobs-dlq"}


@pytest.fixture(scope="session")
def share_seeded(console_server, api):
    """Two share groups on topic ``picks`` (2 partitions, 12 records), one named with markup,
    made over gRPC (REST's group names cannot hold markup; Kafka's and gRPC's can): each has a
    member that acquired all 12, two of them twice, and released one (11 acquired, 1 available;
    as their 30 s locks end, they become available)."""
    grpc = pytest.importorskip("grpc", reason="the grpc extra makes the share groups with markup in their names")
    from vqs.server.grpc.gen import vqs_pb2 as pb
    from vqs.server.grpc.gen import vqs_pb2_grpc as pbg

    md = (("authorization", f"Bearer {TOKEN}"),)
    api.post("/topics", json={"name": "picks", "partitions": 2}).raise_for_status()
    with grpc.insecure_channel(console_server.grpc_target) as ch:
        st = pbg.ShareGroupsStub(ch)
        members = {}
        for g in ("pickers", XSS[0]):
            m = st.Join(pb.ShareJoinRequest(group=g, topics=["picks"]), metadata=md)
            st.Receive(pb.ShareReceiveRequest(group=g, member_id=m.member_id), metadata=md)  # starts at the end
            members[g] = m.member_id
        api.post("/topics/picks/messages", json={"messages": [{"value": f"pick-{i}", "partition": i % 2}
                                                              for i in range(12)]}).raise_for_status()
        for g, mid in members.items():
            got = st.Receive(pb.ShareReceiveRequest(group=g, member_id=mid, max_records=8), metadata=md)
            first = got.batches[0].records
            st.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=mid, acks=[
                pb.ShareAck(topic="picks", partition=first.partition, offset=o, type=pb.RELEASE)
                for o in first.offsets[:2]]), metadata=md)
            again = st.Receive(pb.ShareReceiveRequest(group=g, member_id=mid, max_records=10), metadata=md)
            assert sorted(c for b in again.batches for c in b.delivery_counts) == [1, 1, 1, 1, 2, 2]
            st.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=mid, acks=[pb.ShareAck(
                topic="picks", partition=first.partition, offset=first.offsets[0], type=pb.RELEASE)]), metadata=md)
    return {"topic": "picks", "group": "pickers", "xss_group": XSS[0]}


@pytest.fixture(scope="session")
def browser():
    why = browser_missing()
    if why:
        if os.environ.get("VQS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"VQS_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = chromium()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1000,900", "--hide-scrollbars", "--force-device-scale-factor=1",
              "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver()), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def logged_in(browser, console_server, seeded):
    """The session's browser, logged in to the console through its login form."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(console_server.url + "/console")
    assert browser.current_url.endswith("/console/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form.login button").click()
    WebDriverWait(browser, 15, poll_frequency=0.1).until(lambda d: d.find_elements(By.ID, "health"))
    assert browser.find_element(By.ID, "health").text == "ready"
    return browser
