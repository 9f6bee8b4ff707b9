"""Many partitions under a low open-file limit (issue 13, item 7): each test
runs a child process whose RLIMIT_NOFILE is lowered with setrlimit, soft and
hard alike, so that the broker cannot raise it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = textwrap.dedent(
    """
    import json, os, resource, sys
    sys.path.insert(0, %r)
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    import vqs
    from vqs.storage.file_cache import CACHE

    def fds():
        return len(os.listdir("/proc/self/fd"))
    """
) % ROOT


def run(body: str, d: str, limit: int, *args: str) -> dict:
    code = PRELUDE + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code, d, str(limit), *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


MANY = """
    d, topics = sys.argv[1], int(sys.argv[3])
    base, peak = fds(), 0
    def value(t, p, r):
        return b"t%d/%d/%d" % (t, p, r)
    with vqs.Broker(d, segment_bytes=4096) as b:
        for t in range(topics):
            b.create_topic(f"t{t}", partitions=4)
            peak = max(peak, fds())
        for t in range(topics):
            for p in range(4):
                b.topic(f"t{t}").log(p).append_batch([value(t, p, r) for r in range(2)])
            peak = max(peak, fds())
        b.flush()
        for t in range(topics):
            for p in range(4):
                assert [r.value for r in b.topic(f"t{t}").read(p, 0)] == [value(t, p, r) for r in range(2)]
            peak = max(peak, fds())
    with vqs.Broker(d, segment_bytes=4096) as b:
        after_reopen = fds()
        for t in range(topics):
            for p in range(4):
                log = b.topic(f"t{t}").log(p)
                log.append(value(t, p, 2))
                assert [r.value for r in log.read(0)] == [value(t, p, r) for r in range(3)]
            peak = max(peak, fds())
    print(json.dumps({"base": base, "peak": peak, "cap": CACHE.max_open_files,
                      "after_reopen": after_reopen,
                      "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
"""


def test_240_partitions_produce_read_and_reopen_under_a_limit_of_96(tmp_path):
    r = run(MANY, str(tmp_path / "data"), 96, "60")
    assert r["soft"] == 96 and r["cap"] == 48  # half the soft limit by default
    # the broker's lock, a directory fsync or a file in use by the flusher thread besides the cache
    assert r["peak"] <= r["base"] + r["cap"] + 4, r
    assert r["after_reopen"] <= r["base"] + 2, r  # a reopened partition holds no descriptor


EXHAUSTED = """
    d = sys.argv[1]
    with vqs.Broker(d) as b:
        b.create_topic("t", partitions=4)
        b.topic("t").log(0).append(b"x")
    with vqs.Broker(d) as b:
        hog = []
        try:  # the process's descriptors taken by something else
            while True:
                hog.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        try:
            b.topic("t").log(1).append(b"y")
            b.topic("t").log(1).flush()
            print(json.dumps({"error": None}))
        except vqs.TooManyOpenFiles as e:
            print(json.dumps({"error": str(e), "soft": e.soft_limit, "cap": e.max_open_files}))
"""


def test_a_limit_still_hit_raises_too_many_open_files_naming_it(tmp_path):
    r = run(EXHAUSTED, str(tmp_path / "data"), 64)
    assert r["error"] is not None
    assert "RLIMIT_NOFILE" in r["error"] and "soft 64" in r["error"], r
    assert "max_open_files" in r["error"] and "ulimit -n" in r["error"]
    assert str(tmp_path / "data") in r["error"]  # names the file
    assert r["soft"] == 64


CAP_TOO_HIGH = """
    try:
        vqs.set_max_open_files(1000)
        print(json.dumps({"error": None}))
    except vqs.ConfigError as e:
        print(json.dumps({"error": str(e)}))
"""


def test_a_cap_the_limit_cannot_meet_is_a_config_error(tmp_path):
    r = run(CAP_TOO_HIGH, str(tmp_path), 256)
    assert r["error"] is not None and "RLIMIT_NOFILE" in r["error"] and "soft 256" in r["error"]


RAISE = """
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, limit))
    with vqs.Broker(sys.argv[1]):
        print(json.dumps({"soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                          "cap": CACHE.max_open_files}))
"""


def test_a_broker_raises_the_soft_limit_to_the_hard_limit(tmp_path):
    r = run(RAISE, str(tmp_path / "data"), 512)
    assert r == {"soft": 512, "cap": 256}
