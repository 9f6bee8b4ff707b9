"""SASL/OAUTHBEARER: the initial response's parsing and bounds, the validator against signed
tokens (expired, another key, an HMAC made with the public key, the wrong audience, no
subject), and confluent-kafka producers and consumers logging in with a token an identity
provider would sign, their principal governed by the ACLs."""

from __future__ import annotations

import json
import time

import pytest
from kafka_clients import fails_to_log_in
from kafka_server_proc import KafkaServer

from vqs.errors import ConfigError
from vqs.server.kafka.oauthbearer import (
    MAX_MESSAGE,
    REFETCH_MIN_S,
    OAuthBearerValidator,
    OAuthFailed,
    bearer_token,
)
from vqs.server.settings import Settings

jwt = pytest.importorskip("jwt")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402


def _rsa():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwks(path, **keys) -> str:
    """A JWKS file of the public halves of ``keys`` (kid -> private key)."""
    out = []
    for kid, key in keys.items():
        alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
        algo = jwt.algorithms.ECAlgorithm if alg == "ES256" else jwt.algorithms.RSAAlgorithm
        jwk = json.loads(algo.to_jwk(key.public_key()))
        out.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
    path.write_text(json.dumps({"keys": out}))
    return str(path)


def _token(key, kid="k1", alg="RS256", **claims) -> str:
    now = int(time.time())
    body = {"sub": "svc", "iat": now, "exp": now + 600, "aud": "vqs", "iss": "https://idp.example", **claims}
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid} if kid else None)


def _settings(jwks: str, **more) -> Settings:
    return Settings(kafka_oauthbearer_jwks=jwks, kafka_oauthbearer_audience="vqs", **more)


# ---------------------------------------------------------------------- in process

@pytest.mark.parametrize("message", [
    b"", b"n,,", b"n,,\x01\x01", b"n,,\x01auth=Basic abc\x01\x01", b"y,,\x01auth=Bearer t\x01\x01",
    b"n,,\x01auth=Bearer t\x01", b"n,,\x01auth=Bearer \x01\x01", b"n,,\x01auth=Bearer t\x00\x01\x01",
    b"n,,\x01auth=Bearer " + b"t" * MAX_MESSAGE + b"\x01\x01",
])
def test_malformed_initial_responses_are_refused(message):
    with pytest.raises(OAuthFailed):
        bearer_token(message)


def test_the_initial_response_of_rfc_7628():
    assert bearer_token(b"n,,\x01auth=Bearer vF9dft4qmT\x01\x01") == "vF9dft4qmT"
    assert bearer_token(b"n,a=user@example.com,\x01host=server.example.com\x01port=143\x01"
                        b"auth=Bearer vF9dft4qmT\x01\x01") == "vF9dft4qmT"


def test_the_validator_takes_only_what_a_provider_signed(tmp_path):
    k1, k2, other = _rsa(), ec.generate_private_key(ec.SECP256R1()), _rsa()
    v = OAuthBearerValidator(_settings(_jwks(tmp_path / "jwks.json", k1=k1, k2=k2),
                                       kafka_oauthbearer_issuer="https://idp.example"))
    assert v.principal(_token(k1)) == "User:svc"
    assert v.principal(_token(k2, kid="k2", alg="ES256", sub="edge")) == "User:edge"
    now = int(time.time())
    bad = {
        "expired": _token(k1, exp=now - 120, iat=now - 900),
        "another key": _token(other),
        "unknown kid": _token(k1, kid="k9"),
        "wrong audience": _token(k1, aud="someone-else"),
        "wrong issuer": _token(k1, iss="https://evil.example"),
        "no subject": _token(k1, sub=None),
        "no expiry": _token(k1, exp=None),
        "not yet valid": _token(k1, nbf=now + 600),
    }
    pem = k1.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "kid": "k1"}).encode())
    payload = jwt.utils.base64url_encode(json.dumps({"sub": "root", "exp": now + 600, "aud": "vqs"}).encode())
    import hashlib
    import hmac
    sig = hmac.new(pem, header + b"." + payload, hashlib.sha256).digest()  # the public key as a secret
    bad["hmac with the public key"] = (header + b"." + payload + b"." + jwt.utils.base64url_encode(sig)).decode()
    bad["unsigned"] = (jwt.utils.base64url_encode(json.dumps({"alg": "none"}).encode()) + b"." + payload + b".").decode()
    bad["garbage"] = "not.a.token"
    for why, token in bad.items():
        with pytest.raises(OAuthFailed):
            v.principal(token)
            pytest.fail(f"accepted: {why}")
    _jwks(tmp_path / "jwks.json", k1=other)  # rotated: read again when the file changes
    assert v.principal(_token(other)) == "User:svc"
    with pytest.raises(OAuthFailed):
        v.principal(_token(k1))


def test_a_key_set_that_cannot_serve_stops_the_server(tmp_path):
    for text in ("{", '{"keys": []}', '{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "s"}]}'):
        (tmp_path / "jwks.json").write_text(text)
        with pytest.raises(ConfigError, match="kafka_oauthbearer_jwks"):
            OAuthBearerValidator(_settings(str(tmp_path / "jwks.json")))
    with pytest.raises(ConfigError, match="kafka_oauthbearer_jwks"):
        OAuthBearerValidator(_settings(str(tmp_path / "missing.json")))


# ---------------------------------------------------------------------- real clients

def _conf(server, token_of, **more) -> dict:
    def oauth_cb(_config):
        token = token_of()
        claims = jwt.decode(token, options={"verify_signature": False})
        return token, float(claims["exp"]), claims.get("sub", ""), {}
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb, **more}


def test_confluent_kafka_logs_in_with_a_signed_token_and_acls_govern_its_subject(tmp_path):
    key, other = _rsa(), _rsa()
    jwks = _jwks(tmp_path / "jwks.json", k1=key)
    server = KafkaServer(tmp_path / "data", "--token", "s3cret",
                         env={"VQS_KAFKA_OAUTHBEARER_JWKS": jwks, "VQS_KAFKA_OAUTHBEARER_AUDIENCE": "vqs"}).start()
    try:
        svc = _conf(server, lambda: _token(key))
        p = ck.Producer(svc)
        for i in range(5):
            p.produce("oauth-t", b"m%d" % i)
        assert p.flush(15) == 0
        c = ck.Consumer({**svc, "group.id": "oauth-g", "auto.offset.reset": "earliest"})
        c.subscribe(["oauth-t"])
        got = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 5 and time.monotonic() < deadline:
                m = c.poll(1)
                if m is not None and m.error() is None:
                    got.append(m.value())
        finally:
            c.close()
        assert got == [b"m%d" % i for i in range(5)]
        assert fails_to_log_in(_conf(server, lambda: _token(other)))
        assert fails_to_log_in(_conf(server, lambda: _token(key, aud="elsewhere")))
        server.wait_log("authentication failed: kafka SASL/OAUTHBEARER")
        admin = AdminClient({"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "op", "sasl.password": "s3cret"})
        deny = AclBinding(ResourceType.TOPIC, "oauth-t", ResourcePatternType.LITERAL, "User:svc", "*",
                          AclOperation.WRITE, AclPermissionType.DENY)
        # once an ACL names the topic it is no longer open to every principal (Kafka's
        # allow.everyone.if.no.acl.found): another subject writes by an ALLOW of its own
        allow = AclBinding(ResourceType.TOPIC, "oauth-t", ResourcePatternType.LITERAL, "User:other-svc", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
        assert [f.result(10) for f in admin.create_acls([deny, allow]).values()] == [None, None]
        codes = []
        p = ck.Producer({**_conf(server, lambda: _token(key)), "message.timeout.ms": 10000})
        p.produce("oauth-t", b"late", on_delivery=lambda err, _m: codes.append(err and err.code()))
        p.flush(15)
        assert codes == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        p = ck.Producer({**_conf(server, lambda: _token(key, sub="other-svc"))})
        codes = []
        p.produce("oauth-t", b"ok", on_delivery=lambda err, _m: codes.append(err and err.code()))
        assert p.flush(15) == 0  # another subject: not denied
        assert codes == [None]
    finally:
        assert server.stop() == 0, server.log()


def test_a_session_ends_with_its_token_or_the_reauth_bound_whichever_is_sooner(tmp_path):
    """KIP-368: SaslAuthenticate v1 tells min(kafka_connections_max_reauth_ms, the token's exp)."""
    from raw_client import RawKafka

    from vqs.server.kafka.codec import Writer

    key = _rsa()
    jwks = _jwks(tmp_path / "jwks.json", k1=key)
    server = KafkaServer(tmp_path / "data", "--token", "s3cret",
                         env={"VQS_KAFKA_OAUTHBEARER_JWKS": jwks, "VQS_KAFKA_OAUTHBEARER_AUDIENCE": "vqs",
                              "VQS_KAFKA_CONNECTIONS_MAX_REAUTH_MS": "60000"}).start()
    try:
        lifetimes = []
        for ttl in (20, 3600):
            k = RawKafka(server.kafka_port)
            try:
                assert k.request(17, 1, bytes(Writer().string("OAUTHBEARER").b)).int16() == 0
                token = _token(key, exp=int(time.time()) + ttl)
                r = k.request(36, 1, bytes(Writer().bytes_(b"n,,\x01auth=Bearer %s\x01\x01" % token.encode()).b))
                assert r.int16() == 0, r.nullable_string()
                r.nullable_string()
                r.bytes_()
                lifetimes.append(r.int64())
            finally:
                k.close()
        assert 10_000 < lifetimes[0] <= 20_000  # the token's end (the client logs in with a new one)
        assert lifetimes[1] == 60_000  # the server's bound
    finally:
        assert server.stop() == 0, server.log()


# ---------------------------------------------------------------------- a JWKS endpoint

class _IdP:
    """An identity provider's JWKS endpoint on loopback: serves ``doc`` (bytes) or ``status``,
    counting the fetches."""

    def __init__(self, doc: bytes = b""):
        import http.server
        import threading

        idp = self
        self.doc, self.status, self.fetches = doc, 200, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                idp.fetches += 1
                self.send_response(idp.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(idp.doc)))
                self.end_headers()
                self.wfile.write(idp.doc)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/.well-known/jwks.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _doc(tmp_path, **keys) -> bytes:
    from pathlib import Path

    return Path(_jwks(tmp_path / f"jwks-{len(list(tmp_path.iterdir()))}.json", **keys)).read_bytes()


def _until(check, timeout: float = 10.0):
    """``check()``'s value once it stops raising OAuthFailed (the fetch it asked for landed)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except OAuthFailed:
            assert time.monotonic() < deadline, "the key set was not fetched again"
            time.sleep(0.05)


def test_an_endpoint_is_fetched_again_when_a_token_names_a_key_it_lacks(tmp_path, caplog):
    """The provider rotates its keys: the first token with the new kid fails (a login never
    waits for a fetch), the set is fetched again at once, and the next login succeeds; more
    unknown kids fetch it at most once a REFETCH_MIN_S; a fetch that fails keeps the keys."""
    k1, k2 = _rsa(), _rsa()
    idp = _IdP(_doc(tmp_path, k1=k1))
    try:
        v = OAuthBearerValidator(_settings(idp.url))
        assert v.principal(_token(k1)) == "User:svc" and idp.fetches == 1
        idp.doc = _doc(tmp_path, k1=k1, k2=k2)
        with pytest.raises(OAuthFailed, match="no key 'k2'"):
            v.principal(_token(k2, kid="k2"))
        assert _until(lambda: v.principal(_token(k2, kid="k2"))) == "User:svc"
        fetched = idp.fetches
        for _ in range(50):  # a client naming kids the set lacks costs at most a fetch a second
            with pytest.raises(OAuthFailed):
                v.principal(_token(k2, kid="k9"))
        time.sleep(REFETCH_MIN_S / 2)
        assert idp.fetches <= fetched + 1
        idp.status, idp.doc = 500, b"down"  # the provider fails: logged, the keys in hand serve
        with pytest.raises(OAuthFailed):
            v.principal(_token(k2, kid="k8"))
        deadline = time.monotonic() + 3 * REFETCH_MIN_S + 5
        while "gave no usable JWKS: HTTP 500" not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        assert v.principal(_token(k1)) == "User:svc"
    finally:
        idp.close()


def test_an_endpoint_that_cannot_serve_stops_the_server(tmp_path):
    idp = _IdP(b'{"keys": []}')
    try:
        with pytest.raises(ConfigError, match="gave no usable JWKS: 1 to 100 keys"):
            OAuthBearerValidator(_settings(idp.url), watch=False)
        idp.status = 404
        with pytest.raises(ConfigError, match="gave no usable JWKS: HTTP 404"):
            _settings(idp.url).check()
    finally:
        idp.close()
    with pytest.raises(ConfigError, match="gave no usable JWKS"):  # nothing listens there now
        OAuthBearerValidator(_settings(idp.url), watch=False)
    with pytest.raises(ConfigError, match="plain HTTP to a host that is not loopback"):
        OAuthBearerValidator(_settings("http://idp.example/jwks.json"), watch=False)
    with pytest.raises(ConfigError, match="kafka_oauthbearer_jwks_refresh_ms"):
        Settings(kafka_oauthbearer_jwks_refresh_ms=10).check()


def test_confluent_kafka_logs_in_with_a_key_from_the_endpoint(tmp_path):
    key = _rsa()
    idp = _IdP(_doc(tmp_path, k1=key))
    server = KafkaServer(tmp_path / "data", "--token", "s3cret",
                         env={"VQS_KAFKA_OAUTHBEARER_JWKS": idp.url, "VQS_KAFKA_OAUTHBEARER_AUDIENCE": "vqs"}).start()
    try:
        p = ck.Producer(_conf(server, lambda: _token(key)))
        p.produce("oauth-endpoint", b"m")
        assert p.flush(15) == 0
        assert fails_to_log_in(_conf(server, lambda: _token(_rsa())))
    finally:
        assert server.stop() == 0, server.log()
        idp.close()
