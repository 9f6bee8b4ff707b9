"""librdkafka's own numbered tests against a real ``vqs serve --kafka-port``.

The runner is librdkafka's ``tests/test-runner``, built from its release source by
``make rdkafka-tests`` (under .venv-tools/, gitignored); without it this test skips, saying
so. The subset and why each other broker test is left out: docs/kafka.md ("librdkafka's test
suite"). The server runs as librdkafka's default test cluster is configured (its
scenarios/default.json): topics auto-created with 4 partitions.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from kafka_server_proc import KafkaServer

RDK_VERSION = "2.15.1"
TESTS_DIR = (Path(__file__).resolve().parents[3] / ".venv-tools" / f"librdkafka-{RDK_VERSION}"
             / "src" / "tests")
RUNNER = TESTS_DIR / "test-runner"

#: The numbered tests run (their broker tests, in full). docs/kafka.md lists the ones
#: left out and why.
SUBSET = (
    "0001", "0002", "0003", "0005", "0007", "0008", "0011", "0012", "0013", "0014", "0015", "0016", "0017",
    "0018", "0019", "0020", "0021", "0022", "0026", "0029", "0030", "0031", "0033", "0034", "0035",
    "0036", "0039", "0040", "0041", "0042", "0044", "0045", "0048", "0050", "0051", "0054", "0056",
    "0057", "0059", "0060", "0063", "0065", "0067", "0069", "0070", "0082", "0083", "0084", "0085",
    "0086", "0089", "0090", "0091", "0093", "0099", "0102", "0112", "0114", "0118", "0122",
    "0123", "0125", "0127", "0130", "0132", "0140",
)

#: A whole run's bound (the subset takes about 3 minutes on 2 busy cores; 0089 and 0091 alone
#: wait over a minute each for max.poll.interval.ms).
RUN_TIMEOUT_S = 900

pytestmark = pytest.mark.skipif(
    not os.access(RUNNER, os.X_OK),
    reason=f"librdkafka's test runner is not built ({RUNNER}): run `make rdkafka-tests`")

_RESULT = re.compile(r"Test (\d{4}_\w+) (PASSED|FAILED|SKIPPED)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_librdkafka_numbered_tests(tmp_path):
    server = KafkaServer(tmp_path / "data", env={"VQS_KAFKA_NUM_PARTITIONS": "4"}).start()
    try:
        conf = tmp_path / "test.conf"
        conf.write_text(f"bootstrap.servers={server.bootstrap}\ntest.topic.random=true\n")
        env = dict(os.environ,
                   RDKAFKA_TEST_CONF=str(conf), TESTS=",".join(SUBSET),
                   TEST_KAFKA_VERSION="3.9.0",  # the classic group protocol; no share groups
                   LD_LIBRARY_PATH=f"{TESTS_DIR.parent / 'src'}:{TESTS_DIR.parent / 'src-cpp'}")
        # -L: broker tests only, -E: no socket-fault (sockem) tests; 4 at a time.
        proc = subprocess.run([str(RUNNER), "-L", "-E", "-p4"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=RUN_TIMEOUT_S)
        out = _ANSI.sub("", proc.stdout.decode(errors="replace"))
        (tmp_path / "test-runner.log").write_text(out)
        states = {}
        for name, state in _RESULT.findall(out):
            states.setdefault(name, state)
        failed = sorted(n for n, s in states.items() if s == "FAILED")
        ran = {n[:4] for n, s in states.items() if s == "PASSED"}
        assert proc.returncode == 0 and not failed, (
            f"librdkafka tests failed: {failed} (rc {proc.returncode}); log: "
            f"{tmp_path / 'test-runner.log'}\n" + "\n".join(
                line for line in out.splitlines() if line.startswith("### Test") or "FAIL" in line)[-6000:])
        # every chosen test ran (a test the runner filtered out would pass vacuously)
        assert set(SUBSET) <= ran, f"not run: {sorted(set(SUBSET) - ran)}"
    finally:
        server.stop()
