"""librdkafka's own numbered tests against a real ``vqs serve --kafka-port``.

The runner is librdkafka's ``tests/test-runner``, built from its release source by
``make rdkafka-tests`` (``make test`` does it first; under .venv-tools/, gitignored) with the
tests listed in librdkafka_subset.txt beside this file (run as a Kafka 3.9 cluster: classic
groups), in librdkafka_share_subset.txt (run as a Kafka 4.2 cluster with
``group.protocol=consumer``: share consumers and KIP-848 groups) and in librdkafka_ssl_subset.txt
(over ``security.protocol=ssl`` against a listener that requires client certificates, signed by a
test CA made here with the ``openssl`` command). Without that build the test skips, saying
so, except under CI (``CI`` set), where a missing or stale build fails it. Why each other broker
test is left out: docs/kafka.md ("librdkafka's test suite"). The server runs as librdkafka's
default test cluster is configured (its scenarios/default.json): topics auto-created with 4
partitions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from certs import LOCAL_NAMES, openssl
from kafka_server_proc import KafkaServer

RDK_VERSION = "2.15.1"
ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / ".venv-tools" / f"librdkafka-{RDK_VERSION}"
TESTS_DIR = BUILD / "src" / "tests"
RUNNER = TESTS_DIR / "test-runner"
STAMP = BUILD / ".built"  # the subset the runner was built with (Makefile)
SSL_LIBS = BUILD / ".libs-built-ssl"  # the libraries were built with SSL (Makefile)


def _subset(name: str) -> tuple[str, ...]:
    lines = (Path(__file__).with_name(name)).read_text().splitlines()
    return tuple(t for t in (line.split("#", 1)[0].strip() for line in lines) if t)


#: The numbered tests run (their broker tests, in full). docs/kafka.md lists the ones
#: left out and why.
SUBSET = _subset("librdkafka_subset.txt")
#: Run as Kafka 4.2: the share-consumer tests (KIP-932) and group tests with
#: group.protocol=consumer (KIP-848); the runner's own gates skip share tests below 4.2.
SHARE_SUBSET = _subset("librdkafka_share_subset.txt")

#: Run over SSL, the listener requiring client certificates (``ssl.client.auth=required``).
SSL_SUBSET = _subset("librdkafka_ssl_subset.txt")

#: (subset, the cluster's Kafka version, extra environment)
RUNS = {
    "classic": (SUBSET, "3.9.0", {}),  # the classic group protocol; no share groups
    "share-kip848": (SHARE_SUBSET, "4.2.0", {"TEST_CONSUMER_GROUP_PROTOCOL": "consumer"}),
    "ssl": (SSL_SUBSET, "3.9.0", {}),
}

#: Tests run at once. They mostly wait (the longest, 0089 and 0091, sleep past
#: max.poll.interval.ms for over a minute each) and start in the runner's numeric order, so
#: the run takes about as long as the longest test once enough run at once for it to start
#: early; the runner adds PARALLEL / 3 to its timeout multiplier, which stretches only the
#: bounds of waits for what must arrive.
PARALLEL = int(os.environ.get("VQS_RDKAFKA_PARALLEL", "16"))

#: A whole run's bound (the classic run takes about 90 s on 2 busy cores): under the suite's
#: per-test bound (pyproject.toml), so a hung run fails this test rather than end the suite.
RUN_TIMEOUT_S = 480

_RESULT = re.compile(r"Test (\d{4}_\w+) (PASSED|FAILED|SKIPPED)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _built() -> str | None:
    """Why the runner cannot run this subset, or None when it can."""
    if not os.access(RUNNER, os.X_OK):
        return f"librdkafka's test runner is not built ({RUNNER})"
    if not STAMP.exists():
        return f"librdkafka's test runner was not built by the Makefile (no {STAMP})"
    if not SSL_LIBS.exists():
        return f"librdkafka's libraries were built without SSL (no {SSL_LIBS})"
    if missing := sorted(set(SUBSET + SHARE_SUBSET + SSL_SUBSET) - set(STAMP.read_text().split())):
        return f"librdkafka's test runner was built without {len(missing)} test(s) of the subset ({missing[:10]})"
    return None


def _require_runner() -> None:
    if (why := _built()) is not None:
        if os.environ.get("CI"):  # CI builds it (make test): a missing build is a failure there
            pytest.fail(f"{why}: run `make rdkafka-tests`")
        pytest.skip(f"{why}: run `make rdkafka-tests`")


_FAILED_AT = re.compile(r'### Test "(\w+)" failed at')


def _failure_excerpt(out: str, limit: int = 8000) -> str:
    """What a failed run's report shows (its log stays in the test's tmp_path, which CI does not
    keep): the failure lines, then each failed test's last warnings and steps, which say why."""
    lines = out.splitlines()
    parts = ["\n".join(line for line in lines if line.startswith("### Test") or "FAIL" in line)[-limit // 2:]]
    for name in dict.fromkeys(_FAILED_AT.findall(out)):
        if name.startswith("<"):  # <MAIN>: the runner itself, failing because a test did
            continue
        own = [line for line in lines if line.startswith(f"[{name}")]
        parts.append(f"--- {name}'s last lines:\n" + "\n".join(own[-40:]))
    return "\n".join(parts)[-limit:]


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(RUNS))
def test_librdkafka_numbered_tests(tmp_path, run):
    subset, kafka_version, extra_env = RUNS[run]
    _require_runner()
    env = {"VQS_KAFKA_NUM_PARTITIONS": "4"}
    if run == "ssl":
        if shutil.which("openssl") is None:
            pytest.fail("the SSL run makes its certificates with the openssl command, which is missing")
        pki, ssl_conf = _test_pki(tmp_path / "pki")
        server = KafkaServer(tmp_path / "data", "--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"],
                             "--kafka-tls-client-ca", pki["ca.pem"], env=env).start()
    else:
        server = KafkaServer(tmp_path / "data", env=env).start()
        ssl_conf = ""
    try:
        conf = tmp_path / "test.conf"
        conf.write_text(f"bootstrap.servers={server.bootstrap}\ntest.topic.random=true\n{ssl_conf}")
        # CI=true, always: the runner shares two cores with the rest of the suite, the machine
        # librdkafka's CI mode is for. Its wall-clock bounds (TIMING_ASSERT, e.g. 0001's cycle
        # under 999 ms) then warn instead of failing, as our hypothesis deadlines are off; it
        # adds 2 to the timeout multiplier and sets request.timeout.ms=10000
        env = dict(os.environ, CI="true",
                   RDKAFKA_TEST_CONF=str(conf), TESTS=",".join(subset),
                   TEST_KAFKA_VERSION=kafka_version, **extra_env,
                   LD_LIBRARY_PATH=f"{TESTS_DIR.parent / 'src'}:{TESTS_DIR.parent / 'src-cpp'}")
        # -L: broker tests only, -E: no socket-fault (sockem) tests; PARALLEL at a time.
        proc = subprocess.run([str(RUNNER), "-L", "-E", f"-p{PARALLEL}"], cwd=tmp_path, env=env,
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
            f"{tmp_path / 'test-runner.log'}\n" + _failure_excerpt(out))
        # every chosen test ran (a test the runner filtered out would pass vacuously)
        assert set(subset) <= ran, f"not run: {sorted(set(subset) - ran)}"
    finally:
        server.stop()


def _test_pki(d: Path) -> tuple[dict, str]:
    """A CA, the server's certificate and a client's, both signed by it, the client's key under a
    password (as librdkafka's SSL test cluster has them): (paths, the runner's SSL configuration)."""
    d.mkdir()
    f = {n: str(d / n) for n in ("ca.pem", "ca.key", "server.pem", "server.key", "server.csr", "client.pem",
                                 "client.key", "client.csr", "client.key.pem", "san.ext")}
    password = "librdkafka-test"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["ca.key"], "-out", f["ca.pem"], "-days",
            "1", "-subj", "/CN=librdkafka test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    Path(f["san.ext"]).write_text(LOCAL_NAMES + "\n")
    for who, subj in (("server", "/CN=localhost"), ("client", "/CN=librdkafka")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f[f"{who}.key"], "-out", f[f"{who}.csr"],
                "-subj", subj)
        openssl("x509", "-req", "-in", f[f"{who}.csr"], "-CA", f["ca.pem"], "-CAkey", f["ca.key"],
                "-CAcreateserial", "-out", f[f"{who}.pem"], "-days", "1",
                *(("-extfile", f["san.ext"]) if who == "server" else ()))
    openssl("pkey", "-in", f["client.key"], "-out", f["client.key.pem"], "-aes256", "-passout", f"pass:{password}")
    conf = (f"security.protocol=ssl\nssl.ca.location={f['ca.pem']}\nssl.certificate.location={f['client.pem']}\n"
            f"ssl.key.location={f['client.key.pem']}\nssl.key.password={password}\n")
    return f, conf
