"""``vqs serve`` as a process: start-up failures as one line with their exit code, the start-up
line with the URLs once the socket listens, text logs on a terminal and JSON otherwise, one log
line per refused request. Real processes, a really busy port, a really locked data directory."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import time

import httpx
import pytest
from certs import needs_openssl, self_signed
from vqs_server_proc import ServerProcess, free_port

from vqs.broker import Broker
from vqs.errors import ConfigError


def serve(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vqs.cli", "serve", *map(str, args)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def only_line(p: subprocess.CompletedProcess) -> dict:
    """The one line a failed start wrote (a JSON record: stderr is not a terminal)."""
    lines = (p.stdout + p.stderr).splitlines()
    assert len(lines) == 1, p.stdout + p.stderr
    rec = json.loads(lines[0])
    assert rec["level"] == "error" and rec["exit_code"] == p.returncode and "Traceback" not in lines[0]
    return rec


def test_a_busy_port_is_one_line_exit_3_and_touches_nothing(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = serve("--data-dir", tmp_path / "d", "--port", port)
    assert p.returncode == 3
    assert only_line(p)["msg"].startswith(f"port {port} on 127.0.0.1 is in use")
    assert only_line(p)["msg"].endswith("--port)")
    assert not (tmp_path / "d").exists()  # failed before opening the data directory


def test_a_busy_kafka_port_names_its_own_option(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = serve("--data-dir", tmp_path / "d", "--port", free_port(), "--kafka-port", port)
    assert p.returncode == 3
    msg = only_line(p)["msg"]
    assert msg.startswith(f"port {port} on 127.0.0.1 is in use") and msg.endswith("--kafka-port)")


def test_a_locked_data_dir_is_one_line_naming_the_pid_exit_3(tmp_path):
    d = tmp_path / "d"
    with Broker(d):  # this test process holds the data directory's lock
        p = serve("--data-dir", d, "--port", free_port())
        assert p.returncode == 3
        assert only_line(p)["msg"].startswith(f"data dir {d} is locked by pid {os.getpid()}")
        p = serve("--data-dir", d, "--port", free_port(), "--log-format", "text")
        assert p.returncode == 3
        assert p.stderr.splitlines() == [f"error: data dir {d} is locked by pid {os.getpid()} (another server? "
                                         "one process owns a data dir)"]


def test_a_file_as_data_dir_is_one_line_saying_so_exit_1(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    p = serve("--data-dir", f, "--port", free_port())
    assert p.returncode == 1
    assert only_line(p)["msg"] == f"data dir {f} is a file, not a directory"
    assert f.read_text() == "x"
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        Broker(f)


def test_refused_settings_exit_2(tmp_path):
    p = serve("--data-dir", tmp_path / "d", "--host", "0.0.0.0")
    assert p.returncode == 2 and "--insecure" in p.stderr and len(p.stderr.splitlines()) == 1
    p = serve("--data-dir", tmp_path / "d", "--log-format", "yaml")
    assert p.returncode == 2 and "log_format must be auto, json or text" in p.stderr
    assert not (tmp_path / "d").exists()


def test_without_the_server_extra_one_line_exit_2_naming_the_extra(tmp_path):
    # fastapi made unimportable in the child, as when only the core library is installed
    code = ("import sys; sys.modules['fastapi'] = None; from vqs.cli import app; "
            f"app(['serve', '--data-dir', {str(tmp_path / 'd')!r}, '--port', '{free_port()}'])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    msg = only_line(p)["msg"]
    assert "missing: fastapi" in msg and "pip install 'vqs[server]'" in msg
    assert not (tmp_path / "d").exists()


def test_ready_line_once_listening_json_logs_and_refused_requests(tmp_path):
    s = ServerProcess(tmp_path / "d", "--log-format", "json").start()
    try:
        r = httpx.get(s.url + "/topics/nope")
        assert r.status_code == 404
        r = httpx.post(s.url + "/", data={"Action": "GetQueueUrl", "QueueName": "nope"})
        assert r.status_code == 400
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        assert s.stop() == 0
    recs = [json.loads(line) for line in s.log().splitlines()]
    msgs = [r["msg"] for r in recs]
    assert msgs == ["ready", "rejected", "rejected", "stopping", "closed"], msgs
    ready = recs[0]
    assert (ready["url"], ready["docs"], ready["metrics"]) == (s.url, s.url + "/docs", s.url + "/metrics")
    assert ready["data_dir"] == str(tmp_path / "d") and ready["pid"] == s.proc.pid
    rest, sqs = recs[1], recs[2]
    assert (rest["level"], rest["status"], rest["path"]) == ("info", 404, "/topics/nope")
    assert rest["error"].startswith("topic_not_found: topic 'nope' does not exist")
    assert sqs["status"] == 400 and "NonExistentQueue" in sqs["error"]


def test_text_logs_on_a_terminal(tmp_path):
    """No --log-format: a terminal gets human lines, starting with the URLs."""
    port = free_port()
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "vqs.cli", "serve", "--data-dir", str(tmp_path / "d"),
                             "--port", str(port)], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    try:
        deadline = time.monotonic() + 30
        while b"ready" not in out and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                out += os.read(master, 4096)
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(url + "/topics/nope").status_code == 404  # the socket listened before "ready"
        while b"rejected" not in out and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                out += os.read(master, 4096)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
        os.close(master)
    lines = out.decode().splitlines()
    assert f"ready: API {url}  console {url}/console  docs {url}/docs  metrics {url}/metrics" in lines[0] and not lines[0].startswith("{")
    assert any("rejected 404 GET /topics/nope topic_not_found" in line for line in lines[1:]), lines


def test_settings_from_env_and_toml(tmp_path):
    from vqs.server.settings import load_settings

    cfg = tmp_path / "vqs.toml"
    cfg.write_text('[server]\nport = 9999\ntokens = ["a", "b"]\nflush = "always"\n')
    s = load_settings({"port": None}, env={"VQS_CONFIG": str(cfg), "VQS_SIGV4_KEYS": "K1:S1,K2:S2",
                                           "VQS_MAX_CONNECTIONS": "7"})
    assert (s.port, s.tokens, s.flush, s.max_connections) == (9999, ["a", "b"], "always", 7)
    assert s.sigv4_keys == {"K1": "S1", "K2": "S2"}
    s = load_settings({"port": 1234}, env={"VQS_CONFIG": str(cfg), "VQS_PORT": "5555"})
    assert s.port == 1234  # command line > environment > file


def test_the_cleaner_io_bound_setting():
    from vqs.errors import ConfigError
    from vqs.server.settings import load_settings

    assert load_settings({}, env={}).cleaner_io_max_bytes_per_second is None
    s = load_settings({}, env={"VQS_CLEANER_IO_MAX_BYTES_PER_SECOND": "1048576"})
    assert s.cleaner_io_max_bytes_per_second == 1 << 20
    s = load_settings({}, env={"VQS_CLEANER_IO_MAX_BYTES_PER_SECOND": "0"})
    with pytest.raises(ConfigError, match="cleaner_io_max_bytes_per_second"):
        s.check()


def test_the_request_budget_must_hold_the_largest_request():
    from vqs.errors import ConfigError
    from vqs.server.settings import load_settings

    load_settings({}, env={}).check()  # the defaults: 1 GiB against a 100 MiB Kafka frame
    s = load_settings({}, env={"VQS_MAX_REQUEST_BYTES_IN_FLIGHT": str(64 << 20)})
    with pytest.raises(ConfigError, match=r"max_request_bytes_in_flight \(67108864\) must hold the largest single "
                                          r"request: at least 104857600"):
        s.check()
    s = load_settings({}, env={"VQS_MAX_REQUEST_BYTES_IN_FLIGHT": str(128 << 20),
                               "VQS_MAX_BODY_BYTES": str(128 << 20)})
    with pytest.raises(ConfigError, match="max_body_bytes"):
        s.check()


def test_a_max_open_files_the_limit_cannot_meet_exits_2_naming_the_limit(tmp_path):
    p = serve("--data-dir", tmp_path / "d", "--max-open-files", str(1 << 40))
    assert p.returncode == 2
    assert "RLIMIT_NOFILE" in only_line(p)["msg"]
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("env, message", [
    ({"VQS_HTTP_HEADER_TIMEOUT_S": "nan"}, "http_header_timeout_s must be a positive number, not nan"),
    ({"VQS_KAFKA_FRAME_TIMEOUT_S": "inf"}, "kafka_frame_timeout_s must be a positive number, not inf"),
    ({"VQS_FLUSH_INTERVAL_MS": "0"}, "flush_interval_ms must be a positive number, not 0"),
    ({"VQS_WORKERS_THREADS": "0"}, "workers_threads must be a positive number, not 0"),
    ({"VQS_GRACEFUL_TIMEOUT_S": "-1"}, "graceful_timeout_s must be 0..86400, not -1.0"),
    ({"VQS_HTTP_HEADER_TIMEOUT_S": "1e300"}, "http_header_timeout_s must be a number of seconds in (0, 86400], "
                                             "not 1e+300"),
    ({"VQS_LOG_LEVEL": "chatty"}, "log_level must be one of debug, info, warning, error, critical, not 'chatty'"),
    ({"VQS_MAX_HEADER_BYTES": "10"}, "max_header_bytes must be at least 1024 (1 KiB: a request line and the headers "
                                     "every client sends; the default is 16384), not 10"),
])
def test_settings_that_would_turn_a_bound_off_or_break_the_server_are_refused(env, message):
    from vqs.errors import ConfigError
    from vqs.server.settings import load_settings

    with pytest.raises(ConfigError) as e:
        load_settings({}, env=env).check()
    assert str(e.value) == message


@pytest.mark.parametrize("name, value", [("VQS_KAFKA_USERS", "alice=KafkaSecretPw"),
                                         ("VQS_SIGV4_KEYS", "AKID=TopSecretSigKey")])
def test_a_malformed_credential_setting_is_refused_without_showing_it(name, value):
    from vqs.errors import ConfigError
    from vqs.server.settings import load_settings

    with pytest.raises(ConfigError) as e:
        load_settings({}, env={name: value})
    assert "Secret" not in str(e.value) and "not shown" in str(e.value)


def test_an_empty_token_is_refused_exit_2_naming_tokens(tmp_path):
    # off loopback too: an empty token is no credential, so it cannot stand for one there
    for host in ("127.0.0.1", "0.0.0.0"):
        p = serve("--data-dir", tmp_path / "d", "--host", host, "--port", free_port(), "--token", "")
        assert p.returncode == 2, p.stdout + p.stderr
        assert "tokens: token 1 of 1 is empty" in p.stderr and len(p.stderr.splitlines()) == 1
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("toml, setting", [
    ('tokens = ["good-token", "has space"]', "tokens: token 2 of 2 is not usable"),
    ('tokens = ["tab\\there"]', "tokens: token 1 of 1 is not usable"),
    ('tokens = ["caf\\u00e9-token"]', "tokens: token 1 of 1 is not usable"),
    ('tokens = ["ctl\\u0001x"]', "tokens: token 1 of 1 is not usable"),
    ('sigv4_keys = {AKID = ""}', "sigv4_keys: entry 1 of 1 has an empty or unusable name or secret"),
    ('kafka_users = {bob = ""}', "kafka_users: entry 1 of 1 has an empty or unusable name or secret"),
    ('kafka_users = {"" = "pw-secret"}', "kafka_users: entry 1 of 1 has an empty or unusable name or secret"),
])
def test_unusable_credentials_are_refused_naming_the_setting_not_the_value(tmp_path, toml, setting):
    from vqs.server.settings import load_settings

    (tmp_path / "c.toml").write_text(toml + "\n")
    with pytest.raises(ConfigError) as e:
        load_settings({}, env={}, config_file=str(tmp_path / "c.toml")).check()
    assert str(e.value).startswith(setting) and "not shown" in str(e.value)
    for shown in ("has space", "tab", "caf", "ctl", "pw-secret", "good-token"):
        assert shown not in str(e.value)


def test_vqs_variables_the_server_does_not_read_are_warned_of_and_the_ready_line_says_auth(tmp_path):
    env = {"VQS_TOKEN": "cli-token-value", "VQS_TOKNS": "typo-token-value", "VQS_URL": "http://127.0.0.1:1",
           "VQS_FLUSSH": "always", "VQS_DEPLOYMENT_COLOUR": "blue"}
    s = ServerProcess(tmp_path / "d", env=env).start()
    try:
        log = s.wait_log("ready")
    finally:
        assert s.stop() == 0
    assert "VQS_TOKEN is set, but it is the vqs command's variable" in log and "reads VQS_TOKENS" in log
    assert "VQS_TOKNS is not a setting of the server (ignored): did you mean VQS_TOKENS?" in log
    assert "VQS_FLUSSH is not a setting of the server (ignored): did you mean VQS_FLUSH?" in log
    assert "VQS_URL" not in log and "cli-token-value" not in log and "typo-token-value" not in log
    assert "VQS_DEPLOYMENT_COLOUR" not in log  # not the server's business: no near setting
    assert "auth off (no credentials)" in log
    s = ServerProcess(tmp_path / "d", env={"VQS_TOKENS": "a-server-token", "VQS_TOKEN": "a-server-token"}).start()
    try:
        log = s.wait_log("ready")
    finally:
        assert s.stop() == 0
    assert "auth on" in log and "VQS_TOKEN" not in log


@needs_openssl
def test_a_certificate_and_key_that_are_no_pair_exit_2_naming_both_before_the_data_dir(tmp_path):
    cert, _ = self_signed(tmp_path, "a")
    _, other_key = self_signed(tmp_path, "b")
    for key, why in ((cert, "one of them is not a PEM certificate or private key"),
                     (other_key, "the key is not the certificate's")):
        p = serve("--data-dir", tmp_path / "d", "--port", free_port(), "--tls-cert", cert, "--tls-key", key)
        assert p.returncode == 2, p.stdout + p.stderr
        assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr
        assert f"tls_cert and tls_key do not load as a pair ({why}): certificate {cert}, key {key}" in p.stderr
    assert not (tmp_path / "d").exists()


def test_a_max_header_bytes_below_1_kib_exits_2(tmp_path):
    p = serve("--data-dir", tmp_path / "d", "--port", free_port(), "--max-header-bytes", "10")
    assert p.returncode == 2 and "max_header_bytes must be at least 1024" in p.stderr, p.stdout + p.stderr
    assert not (tmp_path / "d").exists()


def test_a_non_empty_directory_without_vqs_data_is_refused_exit_1_and_left_as_it_was(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "holiday.jpg").write_bytes(b"not vqs")
    p = serve("--data-dir", d, "--port", free_port())
    assert p.returncode == 1, p.stdout + p.stderr
    msg = only_line(p)["msg"]
    assert f"data dir {d} holds files but no VQS data" in msg and "give an empty or new directory" in msg
    assert sorted(os.listdir(d)) == ["holiday.jpg"]


def test_a_data_dir_with_a_tilde_from_toml_or_the_environment_is_under_home(tmp_path):
    (tmp_path / "c.toml").write_text('data_dir = "~/from-toml"\n')
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    for extra, name in ((["--config", str(tmp_path / "c.toml")], "from-toml"), ([], "from-env")):
        log = tmp_path / f"{name}.log"
        run_env = dict(env, VQS_DATA_DIR="~/from-env") if name == "from-env" else env
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "vqs.server", "--port", str(free_port()),
                                     "--log-format", "json", *extra], stdout=out, stderr=subprocess.STDOUT,
                                    cwd=tmp_path, env=run_env)
        try:
            deadline = time.monotonic() + 30
            while '"msg": "ready"' not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert '"msg": "ready"' in log.read_text(), log.read_text()
        finally:
            proc.terminate()
            assert proc.wait(30) == 0
        assert (tmp_path / "home" / name / ".lock").exists() and not (tmp_path / "~").exists()


def test_a_filesystem_root_with_only_lost_and_found_is_a_new_data_dir(tmp_path):
    """A disk of its own mounted for the data holds lost+found at its root: that is no other
    program's directory (the server and the CLI take it as a new data directory)."""
    from vqs.broker import layout

    assert not layout.someone_elses(["lost+found"])
    assert layout.someone_elses(["lost+found", "cat.jpg"])
    assert not layout.someone_elses(["lost+found", "topics"])
    d = tmp_path / "disk"
    (d / "lost+found").mkdir(parents=True)
    s = ServerProcess(d).start()
    assert s.stop() == 0, s.log()
    assert (d / ".lock").exists() or (d / "topics").exists()


def test_an_infinite_integer_in_the_config_file_is_refused_exit_2(tmp_path):
    cfg = tmp_path / "vqs.toml"
    cfg.write_text("max_body_bytes = inf\n")
    p = serve("--config", cfg, "--data-dir", tmp_path / "d", "--port", free_port())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "max_body_bytes" in p.stderr

