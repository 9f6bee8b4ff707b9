"""A console page with 1,000 topics, and one with 1,000 queues, loads in under a second
(server time and the browser's DOM ready), against a real `vqs serve`.

The data directory is made with the embedded Broker before the server starts
(on tmpfs when there is one: creating 2,000 logs is fsync-bound, and this
test measures the console, not the disk). The first page after a start waits
for the broker to open every queue (queues open on first use; the console's
sampler opens them within its first second), so one warm-up load comes first.
Timing is meaningless on an oversubscribed machine (load average over twice
the cores): there a miss of the bar skips, naming the figures and the load;
elsewhere (CI) it fails.
"""

from __future__ import annotations

import os
import tempfile
import time

import httpx
import pytest
from console_helpers import console_problems
from vqs_server_proc import ServerProcess

from vqs import Broker

N = 1000


@pytest.fixture(scope="module")
def big_server(tmp_path_factory):
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    root = tempfile.mkdtemp(prefix="vqs-console-scale-", dir=base)
    data = os.path.join(root, "data")
    with Broker(data, flush="never") as b:
        for i in range(N):
            b.create_topic(f"topic-{i:04d}")
        for i in range(N):
            q = b.create_queue(f"queue-{i:04d}")
            if i % 10 == 0:
                q.send(f"message {i}")
    s = ServerProcess(data, port=None).start()
    yield s
    rc = s.stop()
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    assert rc == 0, s.log()


@pytest.mark.parametrize("path,rows", [("/console/topics", "#topics tbody tr"), ("/console/queues", "#queues tbody tr")])
def test_a_thousand_rows_load_in_under_a_second(browser, big_server, path, rows):
    from selenium.webdriver.common.by import By

    url = big_server.url + path
    assert httpx.get(url, timeout=60).status_code == 200  # warm-up (see module doc)
    t0 = time.perf_counter()
    r = httpx.get(url, timeout=60)
    server_s = time.perf_counter() - t0
    assert r.status_code == 200
    browser.get(url)  # the console's static files cached, as after any first page
    browser.get(url)
    nav = browser.execute_script("var n = performance.getEntriesByType('navigation')[0];"
                                 "return {ready: n.domContentLoadedEventEnd, response: n.responseEnd};")
    assert len(browser.find_elements(By.CSS_SELECTOR, rows)) == N
    assert console_problems(browser) == []
    # ms from the start of the navigation: request, response, parse, scripts
    figures = f"server {server_s * 1000:.0f} ms, DOM ready {nav['ready']:.0f} ms (response end {nav['response']:.0f} ms)"
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if (server_s >= 1.0 or nav["ready"] >= 1000) and load > 2 * cores:
        pytest.skip(f"{figures}: over 1 s on a machine running {load:.0f} runnable tasks on {cores} cores; "
                    "the bar is checked where the machine is not oversubscribed (CI)")
    assert server_s < 1.0 and nav["ready"] < 1000, figures
