"""Server settings: defaults < TOML file < ``VQS_*`` environment < command line.

Every setting has a ``VQS_`` environment variable of the upper-cased name
(``VQS_PORT=8642``, ``VQS_TOKENS=t1,t2``, ``VQS_SIGV4_KEYS=AKID:secret,...``, ``VQS_KAFKA_USERS=name:password,...``).
A TOML file (``--config FILE`` or ``VQS_CONFIG``) may hold the same names at
top level or under a ``[server]`` table.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ConfigError
from .addresses import is_loopback

#: Kafka principals (User:NAME). Given as one string they are separated by ";" (Kafka's
#: super.users) or by a "," before the next "User:": a certificate's subject holds commas
#: (User:CN=alice,O=acme).
Principals = list[str]
_PRINCIPAL_SEP = r";|,(?=\s*User:)"

#: The documented default port ("VQS" on a phone keypad is 8-7-7; 8642 is simply unused by
#: anything common and easy to remember).
DEFAULT_PORT = 8642
DEFAULT_ACCOUNT = "123456789012"
#: the least ``max_header_bytes``: below it even a plain ``GET /health`` from a common client
#: (its request line, Host, User-Agent, Accept, an Authorization header) could be refused 431
MIN_HEADER_BYTES = 1024


@dataclass
class Settings:
    data_dir: str = "vqs-data"
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    # security
    tokens: list[str] = field(default_factory=list)          # bearer tokens for REST
    sigv4_keys: dict[str, str] = field(default_factory=dict)  # access key id -> secret (SQS)
    kafka_users: dict[str, str] = field(default_factory=dict)  # SASL/PLAIN user -> password for Kafka
                                                               # clients; given, they replace the tokens there
    kafka_oauthbearer_jwks: str = ""                           # the identity provider's public keys, a JWKS file or
                                                               # its https:// endpoint: Kafka clients log in with its
                                                               # signed tokens (SASL/OAUTHBEARER)
    kafka_oauthbearer_jwks_refresh_ms: int = 3_600_000         # an endpoint's keys fetched again this often (and on
                                                               # an unknown kid; Kafka's ...jwks.endpoint.refresh.ms)
    kafka_oauthbearer_audience: str = ""                       # a token's aud must name this (empty: not checked)
    kafka_oauthbearer_issuer: str = ""                         # a token's iss must be this (empty: not checked)
    kafka_oauthbearer_sub_claim: str = "sub"                   # the claim naming the principal (User:<it>)
    kafka_super_users: Principals = field(default_factory=list)  # Kafka principals (User:NAME) no ACL restricts
    kafka_allow_if_no_acl: bool = True                         # a resource no Kafka ACL names is open to every
                                                               # principal (Kafka's allow.everyone.if.no.acl.found)
    insecure: bool = False                                     # allow non-loopback without credentials
    allowed_hosts: list[str] = field(default_factory=list)     # Host names answered besides localhost, IP addresses
    tls_cert: str = ""                                         # PEM certificate (chain): HTTPS and gRPC over TLS
    tls_key: str = ""                                          # its PEM private key
    kafka_tls_client_ca: str = ""                              # PEM CA certificates: Kafka clients must present a
                                                               # certificate they signed; it authenticates them as
                                                               # User:<its subject> (Kafka's ssl.client.auth=required)
    kafka_tls_client_auth: str = "required"                    # or requested: a client may present no certificate
                                                               # (then SASL), Kafka's ssl.client.auth
    kafka_tls_principal_mapping_rules: str = "DEFAULT"         # a certificate subject -> the principal's name
                                                               # (Kafka's ssl.principal.mapping.rules)
    # gRPC front (vqs/server/grpc, the grpc extra)
    grpc_port: int = 0                                         # 0: off
    # native protocol (vqs/server/native.py): the REST API over persistent TCP frames, no HTTP
    native_port: int = 0                                       # 0: off
    native_frame_timeout_s: float = 30.0                       # a frame arrives whole within this of its first byte
    native_idle_timeout_s: float = 300.0                       # an idle native connection is closed
    # SQS
    account_id: str = DEFAULT_ACCOUNT
    region: str = "us-east-1"                                  # used when a request carries no signature
    sigv4_max_skew_s: int = 900
    sqs_recreate_wait_s: int = 60                              # CreateQueue of a name deleted this recently:
                                                               # QueueDeletedRecently, as SQS (0: off)
    # durability (broker defaults)
    flush: str = "interval"                                    # always | interval | never
    flush_interval_ms: int = 100
    min_free_bytes: int | None = None         # refuse topic/queue writes under this much free disk
                                              # (None: min(64 MiB, 5 % of the filesystem); 0: off)
    cleaner_interval_ms: int = 15_000         # the log cleaner looks at compacted topics this often
    cleaner_io_max_bytes_per_second: int | None = None  # a cleaning pass reads+writes at most this (None: no bound)
    health_cache_ms: int = 1000               # /health keeps its list of logs and a healthy free space
                                              # this long (0: off); failed or full logs show at once
    # limits
    max_body_bytes: int = 64 << 20
    max_message_bytes: int = 1 << 20          # REST topic messages (SQS uses the queue's MaximumMessageSize)
    max_header_bytes: int = 16 << 10
    max_connections: int = 1024               # connections open at once, per listener (HTTP, Kafka, gRPC;
                                              # held to each one's share of the open-file limit)
    max_connections_per_client: int = 256     # connections open at once from one remote address, per listener
    max_pre_auth_bytes: int = 256 << 20       # bytes held at once, server-wide, for requests not authenticated yet
                                              # (Kafka frames before SASL, SQS bodies before their signature,
                                              # console login forms): past it 503 / closed (byte_budget.py)
    max_request_bytes_in_flight: int = 1 << 30  # bytes of every request being read or handled, server-wide
                                              # (Kafka's queued.max.request.bytes): past it HTTP 503, a native
                                              # or Kafka connection not read until some come back (byte_budget.py)
    http_header_timeout_s: float = 10.0       # a request's headers must be complete within this (408, closed)
    max_long_poll_waiters: int = 256
    max_wait_ms: int = 20_000                 # REST long poll cap (1-20000: SQS's 20 s at most)
    max_partitions_per_topic: int = 256
    max_total_partitions: int = 4096          # every partition is a log (files, and a flusher thread)
    # Kafka listener (vqs/server/kafka): off unless a port is given
    kafka_port: int = 0
    kafka_max_frame_bytes: int = 100 << 20    # a larger request frame closes its connection
    kafka_auth_timeout_s: float = 10.0        # a connection that must authenticate (SASL) does so within this
    kafka_frame_timeout_s: float = 10.0       # a request arrives whole within this (the first: of the connect)
    kafka_idle_timeout_s: float = 600.0       # an idle connection is closed (Kafka's connections.max.idle.ms)
    kafka_connections_max_reauth_ms: int = 0  # a SASL login lasts this long (or to its token's exp), then the
                                              # client logs in again on its connection (KIP-368); 0: no end
    kafka_group_min_session_timeout_ms: int = 6_000        # JoinGroup's session timeout at least this (Kafka's
    kafka_group_max_session_timeout_ms: int = 1_800_000    # group.min/max.session.timeout.ms); the rebalance
                                                           # timeout at most the max: else INVALID_SESSION_TIMEOUT
    kafka_auto_create_topics: bool = True     # Metadata/Produce of an unknown topic creates it
    kafka_num_partitions: int = 1             # partitions of an auto-created topic, and of CreateTopics'
                                              # -1 (Kafka's num.partitions); 1..max_partitions_per_topic
    kafka_consumer_session_timeout_ms: int = 45_000      # consumer protocol (KIP-848) groups: a member's
    kafka_consumer_heartbeat_interval_ms: int = 1_500    # session, the heartbeat interval members are told
                                                         # (under 2 s: a dead member's partitions move
                                                         # within 2 s of its session's end)
    kafka_share_record_lock_ms: int = 30_000         # share groups: a record's acquisition lock (Kafka's
    kafka_share_delivery_limit: int = 5              # group.share.record.lock.duration.ms), deliveries before
    kafka_share_auto_offset_reset: str = "latest"    # it is archived, where a new share group starts, a member's
    kafka_share_session_timeout_ms: int = 45_000     # session, the heartbeat interval members are told
    kafka_share_heartbeat_interval_ms: int = 5_000
    kafka_share_max_record_locks: int = 2_000        # records acquired at once per share partition
    kafka_advertised_listener: str = ""       # host:port clients are told to connect to (default: the bound one)
    max_open_files: int = 0                   # segment files kept open (LRU); 0: half the open-file limit
    # logging
    log_level: str = "info"
    log_format: str = "auto"                  # auto (text on a terminal, else json) | json | text
    access_log: bool = False
    # runtime: answer plain requests to the hot routes (REST produce, consume, queue send/
    # receive/delete; the SQS endpoint) in uvicorn's HTTP protocol, below ASGI, without the
    # framework (vqs/server/fast_http.py, lean.py; the same answers). Off: every request
    # through the ASGI app and FastAPI (to compare the two).
    fast_http: bool = True
    # runtime
    graceful_timeout_s: float = 25.0
    workers_threads: int = 32                 # threads for blocking broker calls (fsync, etc.)

    # ---------------------------------------------------------------- checks
    @property
    def auth_enabled(self) -> bool:
        """Any credential configured: then REST, /metrics and the console need a bearer token
        (SigV4 keys grant the SQS API only) and SQS needs a signature."""
        return bool(self.tokens or self.sigv4_keys or self.kafka_users)

    def check(self) -> None:
        """Refuse settings that would be unsafe or cannot work (ConfigError names the setting)."""
        _check_credentials(self)
        for p in self.kafka_super_users:
            if not p.startswith("User:") or len(p) == 5:
                raise ConfigError(f"kafka_super_users: {p!r} is not a principal of the form User:NAME")
        if self.flush not in ("always", "interval", "never"):
            raise ConfigError(f"flush must be always, interval or never, not {self.flush!r}")
        if not (0 < self.port < 65536):
            raise ConfigError(f"port must be 1-65535, not {self.port}")
        for name in ("max_body_bytes", "max_message_bytes", "max_header_bytes",
                     "max_connections", "max_long_poll_waiters", "max_connections_per_client", "max_pre_auth_bytes",
                     "max_request_bytes_in_flight", "flush_interval_ms", "workers_threads", "max_total_partitions",
                     "max_partitions_per_topic", "native_frame_timeout_s", "native_idle_timeout_s",
                     "http_header_timeout_s", "kafka_auth_timeout_s", "kafka_frame_timeout_s",
                     "kafka_idle_timeout_s", "kafka_max_frame_bytes", "kafka_group_min_session_timeout_ms",
                     "kafka_group_max_session_timeout_ms", "cleaner_interval_ms"):
            v = getattr(self, name)
            if not v > 0 or not math.isfinite(v):  # (NaN compares false: it would turn a deadline off)
                raise ConfigError(f"{name} must be a positive number, not {v!r}")
        if self.max_header_bytes < MIN_HEADER_BYTES:
            raise ConfigError(f"max_header_bytes must be at least {MIN_HEADER_BYTES} (1 KiB: a request line and the "
                              f"headers every client sends; the default is {16 << 10}), not {self.max_header_bytes}")
        for name in ("graceful_timeout_s", "sqs_recreate_wait_s"):
            v = getattr(self, name)
            if not 0 <= v <= 86_400:  # (NaN compares false)
                raise ConfigError(f"{name} must be 0..86400, not {v!r}")
        if str(self.log_level).lower() not in LOG_LEVELS:
            raise ConfigError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}")
        for name in ("kafka_consumer_session_timeout_ms", "kafka_consumer_heartbeat_interval_ms",
                     "kafka_share_record_lock_ms", "kafka_share_delivery_limit", "kafka_share_session_timeout_ms",
                     "kafka_share_heartbeat_interval_ms", "kafka_share_max_record_locks"):
            if not (0 < getattr(self, name) <= 3_600_000):
                raise ConfigError(f"{name} must be 1..3600000, not {getattr(self, name)!r}")
        if not (0 <= self.kafka_connections_max_reauth_ms <= 2**31 - 1):
            raise ConfigError("kafka_connections_max_reauth_ms must be 0 (sessions never end) to 2147483647, "
                              f"not {self.kafka_connections_max_reauth_ms!r}")
        if self.kafka_share_auto_offset_reset not in ("latest", "earliest"):
            raise ConfigError(f"kafka_share_auto_offset_reset must be latest or earliest, "
                              f"not {self.kafka_share_auto_offset_reset!r}")
        if not (1 <= self.kafka_num_partitions <= self.max_partitions_per_topic):
            raise ConfigError(f"kafka_num_partitions must be 1..max_partitions_per_topic "
                              f"({self.max_partitions_per_topic}), not {self.kafka_num_partitions}")
        largest = max(self.max_body_bytes + (64 << 10), self.kafka_max_frame_bytes)
        if self.max_request_bytes_in_flight < largest:
            raise ConfigError(f"max_request_bytes_in_flight ({self.max_request_bytes_in_flight}) must hold the "
                              f"largest single request: at least {largest} (max_body_bytes + 64 KiB, and "
                              "kafka_max_frame_bytes)")
        if self.health_cache_ms < 0:
            raise ConfigError(f"health_cache_ms must be >= 0 (0: off), not {self.health_cache_ms}")
        if self.cleaner_io_max_bytes_per_second is not None and self.cleaner_io_max_bytes_per_second <= 0:
            raise ConfigError("cleaner_io_max_bytes_per_second must be positive (or unset: no bound)")
        if self.min_free_bytes is not None and self.min_free_bytes < 0:
            raise ConfigError(f"min_free_bytes must be >= 0 (0: off), not {self.min_free_bytes}")
        if self.max_open_files != 0 and self.max_open_files < 4:
            raise ConfigError(f"max_open_files must be 0 (automatic) or >= 4, not {self.max_open_files}")
        if not (0 < self.max_wait_ms <= 20_000):
            raise ConfigError(f"max_wait_ms must be 1-20000 (SQS's 20 s long-poll cap), not {self.max_wait_ms}")
        for h in self.allowed_hosts:
            if not h or any(c in h for c in " /\\@"):
                raise ConfigError(f"allowed_hosts: {h!r} is not a host name (give names like vqs.example.com)")
        if not (0 <= self.grpc_port < 65536) or (self.grpc_port and self.grpc_port == self.port):
            raise ConfigError(f"grpc_port must be 1-65535 and not the HTTP port {self.port} (0: off), "
                              f"not {self.grpc_port}")
        if self.grpc_port and not is_loopback(self.host) and not self.tokens and not self.insecure:
            raise ConfigError(
                f"refusing to serve gRPC on {self.host}, which is not a loopback address, without bearer "
                "tokens (--token / VQS_TOKENS; gRPC takes no SigV4 keys), or pass --insecure"
            )
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert and tls_key go together: give both (--tls-cert FILE --tls-key FILE) or neither")
        for name in ("tls_cert", "tls_key"):
            path = getattr(self, name)
            if path and not os.access(path, os.R_OK):
                raise ConfigError(f"{name}: cannot read {path}")
        if self.tls_cert:
            _check_tls_pair(self.tls_cert, self.tls_key)
        if self.kafka_tls_client_ca:
            if not self.tls_cert:
                raise ConfigError("kafka_tls_client_ca needs the listener's own certificate: give --tls-cert "
                                  "and --tls-key too")
            if not os.access(self.kafka_tls_client_ca, os.R_OK):
                raise ConfigError(f"kafka_tls_client_ca: cannot read {self.kafka_tls_client_ca}")
            from .kafka.tls import PrincipalMapper, server_context

            server_context(self.tls_cert, self.tls_key, self.kafka_tls_client_ca,  # ConfigError naming the
                           self.kafka_tls_client_auth)  # file or the setting
            PrincipalMapper(self.kafka_tls_principal_mapping_rules)  # ConfigError naming the rule
        if not (0 <= self.kafka_port < 65536):
            raise ConfigError(f"kafka_port must be 1-65535 (0: no Kafka listener), not {self.kafka_port}")
        ports = {"port": self.port, "grpc_port": self.grpc_port, "kafka_port": self.kafka_port}
        if not (0 <= self.native_port < 65536) or (self.native_port and self.native_port in ports.values()):
            raise ConfigError(f"native_port must be 1-65535 and not another listener's port (0: off), "
                              f"not {self.native_port}")
        if self.native_port and self.tls_cert:
            raise ConfigError("native_port: the native protocol has no TLS (yet); with --tls-cert, clients use "
                              "HTTPS, so leave --native-port off")
        for name in ("native_frame_timeout_s", "native_idle_timeout_s", "http_header_timeout_s", "kafka_auth_timeout_s",
                     "kafka_frame_timeout_s", "kafka_idle_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= 86_400):
                raise ConfigError(f"{name} must be a number of seconds in (0, 86400], not {value!r}")
        if not (1_000 <= self.kafka_oauthbearer_jwks_refresh_ms <= 86_400_000):
            raise ConfigError("kafka_oauthbearer_jwks_refresh_ms must be 1000..86400000, "
                              f"not {self.kafka_oauthbearer_jwks_refresh_ms!r}")
        if self.kafka_oauthbearer_jwks:
            from .kafka.oauthbearer import OAuthBearerValidator

            OAuthBearerValidator(self, watch=False)  # the key set loads (ConfigError naming it and why)
        if self.kafka_port and not is_loopback(self.host) and not (
                self.tokens or self.kafka_users or self.kafka_oauthbearer_jwks
                or (self.kafka_tls_client_ca and self.kafka_tls_client_auth == "required")) \
                and not self.insecure:
            raise ConfigError(
                f"refusing a Kafka listener on {self.host}, which is not a loopback address, without "
                "credentials: give tokens (--token / VQS_TOKENS; Kafka clients use SASL/PLAIN with a "
                "token as the password), or pass --insecure"
            )
        # (after the gRPC and Kafka checks, which name their front)
        if not is_loopback(self.host) and not self.tokens and not self.insecure:
            # SigV4 keys grant the SQS API only: REST, /metrics and the console need a token
            raise ConfigError(
                f"refusing to listen on {self.host} (not a loopback address) for REST, /metrics, the "
                "console, gRPC and Kafka without bearer tokens: give --token / VQS_TOKENS (SigV4 keys, "
                "--sigv4-key AKID:SECRET, grant the SQS API only), or pass --insecure"
            )
        if self.log_format not in ("auto", "json", "text"):
            raise ConfigError(f"log_format must be auto, json or text, not {self.log_format!r}")
        if not (self.account_id.isdigit() and len(self.account_id) == 12):
            raise ConfigError(f"account_id must be 12 digits, not {self.account_id!r}")


#: what a token or a name in a credential may hold: visible ASCII (what an HTTP header and gRPC
#: metadata carry as is), no space or control character, at least one
_VISIBLE = re.compile(r"[\x21-\x7e]+")
_UNUSABLE = re.compile(r"[\x00-\x20\x7f-\x9f]")  # in a SigV4 key's or Kafka user's name or secret


def _check_credentials(s: Settings) -> None:
    """Every credential usable: a token is visible ASCII (an empty one would turn authentication
    on with a credential no client can send, and pass the off-loopback check); a SigV4 key's id
    and a Kafka user's name are not empty and hold no space or control character, their secret
    is not empty and holds no control character. The error names the setting and the
    credential's place, never its value."""
    for i, t in enumerate(s.tokens, 1):
        if not isinstance(t, str) or not _VISIBLE.fullmatch(t):
            raise ConfigError(f"tokens: token {i} of {len(s.tokens)} is {'empty' if not t else 'not usable'} (not "
                              "shown): a token is 1 or more visible ASCII characters, no spaces, control or "
                              "non-ASCII characters (python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    for name, what in (("sigv4_keys", "an access key id"), ("kafka_users", "a user name")):
        for i, (key, secret) in enumerate(getattr(s, name).items(), 1):
            if not key or not secret or _UNUSABLE.search(key) or _UNUSABLE.search(secret.replace(" ", "")):
                raise ConfigError(f"{name}: entry {i} of {len(getattr(s, name))} has an empty or unusable name or "
                                  f"secret (not shown): give NAME:SECRET, {what} without spaces or control "
                                  "characters and a secret that is not empty and holds no control characters")


def _check_tls_pair(cert: str, key: str) -> None:
    """The certificate (chain) and its private key load together, as every TLS front loads them
    (HTTPS, gRPC, Kafka): refused here, before a port or the data directory is touched, rather
    than by the first front that loads them."""
    import ssl

    def no_passphrase():
        raise ConfigError(f"tls_key: {key} is encrypted; give an unencrypted key (the server takes no passphrase)")

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=no_passphrase)
    except ssl.SSLError as e:
        why = "the key is not the certificate's" if "KEY_VALUES_MISMATCH" in str(e) else (
            "one of them is not a PEM certificate or private key")
        raise ConfigError(f"tls_cert and tls_key do not load as a pair ({why}): certificate {cert}, key {key}") from None
    except OSError as e:
        raise ConfigError(f"tls_cert and tls_key: cannot load {cert} and {key}: {e.strerror or e}") from None


#: ``VQS_*`` variables that are not settings of the server: its own (the config file's) and
#: those of the vqs command's clients (docs/cli.md) and of the Spark workers (docs/spark.md)
OTHER_VARIABLES = frozenset({"VQS_CONFIG", "VQS_URL", "VQS_TOKEN", "VQS_UTC", "VQS_SPARK_GC_FREEZE"})


def environment_warnings(settings: Settings, env: Mapping[str, str] | None = None) -> list[str]:
    """What to warn of in the ``VQS_*`` environment (names only, never a value): a variable that
    looks like a misspelt setting (it is ignored, and leaves that setting at its default), and
    ``VQS_TOKEN``, the vqs command's token, which is not the server's ``VQS_TOKENS`` (said when the
    server has no token: it runs without them). Other ``VQS_*`` variables (a deployment's or a
    test harness's own) are not the server's business: no warning."""
    import difflib

    env = os.environ if env is None else env
    known = {"VQS_" + f.name.upper() for f in fields(Settings)}
    out = []
    for name in sorted(k for k in env if k.startswith("VQS_")):
        if name == "VQS_TOKEN" and not settings.tokens:
            out.append("VQS_TOKEN is set, but it is the vqs command's variable (a client's token): the server "
                       "reads VQS_TOKENS (comma-separated) or --token, and has no bearer token")
        elif name not in known and name not in OTHER_VARIABLES:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            if close:
                out.append(f"{name} is not a setting of the server (ignored): did you mean {close[0]}?")
    return out


#: settings whose values are credentials: never shown in an error
SECRET_SETTINGS = frozenset({"tokens", "sigv4_keys", "kafka_users"})
#: the log levels ``log_level`` takes
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

#: how a list setting given as one string is split, by its type
_LISTS = {"list[str]": ",", "Principals": _PRINCIPAL_SEP}


def _coerce(name: str, kind: Any, value: Any) -> Any:
    try:
        if kind in (int, "int"):
            return int(value)
        if kind == "int | None":
            return None if value is None or str(value).strip().lower() in ("", "none", "default") else int(value)
        if kind in (float, "float"):
            return float(value)
        if kind in (bool, "bool"):
            if isinstance(value, bool):
                return value
            v = str(value).strip().lower()
            if v in ("1", "true", "yes", "on"):
                return True
            if v in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(value)
        if kind in _LISTS:
            if isinstance(value, str):
                return [t.strip() for t in re.split(_LISTS[kind], value) if t.strip()]
            return [str(t) for t in value]
        if kind in ("dict[str, str]",):
            if isinstance(value, Mapping):
                return {str(k): str(v) for k, v in value.items()}
            if isinstance(value, str):
                value = [t for t in value.split(",") if t.strip()]
            out = {}
            for item in value:
                akid, sep, secret = str(item).strip().partition(":")
                if not sep or not akid or not secret:
                    raise ValueError(item)
                out[akid] = secret
            return out
        return str(value)
    except (TypeError, ValueError, OverflowError):  # (OverflowError: a TOML inf for an integer)
        if name in SECRET_SETTINGS:  # never echoed: an error line goes to logs and terminals
            raise ConfigError(f"setting {name}: cannot use the value given (not shown: it holds secrets; "
                              "give NAME:SECRET pairs separated by commas)") from None
        raise ConfigError(f"setting {name}: cannot use {value!r}") from None


def load_settings(overrides: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None,
                  config_file: str | None = None) -> Settings:
    """Build Settings from defaults, a TOML file, VQS_* variables and overrides (None = not given)."""
    env = os.environ if env is None else env
    kinds = {f.name: f.type for f in fields(Settings)}
    values: dict[str, Any] = {}
    config_file = config_file or env.get("VQS_CONFIG")
    if config_file:
        import tomllib

        try:
            with open(config_file, "rb") as f:
                doc = tomllib.load(f)
        except OSError as e:
            raise ConfigError(f"cannot read config file {config_file}: {e}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {config_file} is not valid TOML: {e}") from None
        doc = doc.get("server", doc)
        for k, v in doc.items():
            k = k.replace("-", "_")
            if k not in kinds:
                raise ConfigError(f"config file {config_file}: unknown setting {k!r}")
            values[k] = _coerce(k, kinds[k], v)
    for k, kind in kinds.items():
        ev = env.get("VQS_" + k.upper())
        if ev is not None:
            values[k] = _coerce(k, kind, ev)
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k not in kinds:
            raise ConfigError(f"unknown setting {k!r}")
        if kinds[k] in _LISTS and not v:
            continue
        if kinds[k] == "dict[str, str]" and not v:
            continue
        values[k] = _coerce(k, kinds[k], v)
    if "data_dir" in values:  # "~/vqs-data" from a TOML file or VQS_DATA_DIR (no shell expands it there)
        values["data_dir"] = os.path.expanduser(values["data_dir"])
    s = Settings(**values)
    return s
