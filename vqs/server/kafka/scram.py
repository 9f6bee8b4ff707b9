"""SASL/SCRAM (RFC 5802, RFC 7677): Kafka's SCRAM-SHA-256 and SCRAM-SHA-512 users, their
admin APIs DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), and the
server's side of the exchange.

A user's credential is what Kafka keeps of it: the salt, the iteration count, StoredKey =
H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key").
Neither the password nor the salted password is kept, and the server never iterates the
hash: the client sends the salted password when it sets a credential, and proves it knows
it at each login. So a login costs the server a few HMACs, whoever asks.

Invariants:

- ``ScramCredentials`` is the only writer of its file (``DATA/scram_credentials.json``,
  docs/FORMAT.md); an alteration is answered after the file holding it is replaced
  atomically and fsynced, and all the alterations of one request land together or none does.
- As Kafka's ScramControlManager: iterations 4096..16384, a non-empty user name, a known
  mechanism; a user named twice in one request is DUPLICATE_RESOURCE and nothing of it is
  applied; deleting a credential that does not exist is RESOURCE_NOT_FOUND.
- Bounded before anything is kept: at most ``MAX_USERS`` users, names of at most
  ``MAX_NAME`` characters, salts of at most ``MAX_SALT`` bytes, salted passwords of exactly
  the hash's size; a client's SCRAM message of at most ``MAX_MESSAGE`` bytes.
- A login for an unknown user (or a mechanism it has no credential for) is answered with a
  salt derived from the name and a per-process secret, and fails at the proof, exactly as a
  wrong password does: the exchange does not tell which names exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
from collections import Counter
from typing import NamedTuple

from ... import errors as E
from ...broker.layout import scram_credentials_file
from ...storage import atomic_write
from . import acls as A
from . import errors as K
from .codec import Writer

#: Kafka's ScramMechanism type ids -> (SASL name, hashlib name)
MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
BY_NAME = {name: mid for mid, (name, _) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
MAX_USERS = 1000
MAX_NAME = 256
MAX_SALT = 1024
MAX_MESSAGE = 4096


class Credential(NamedTuple):
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def credential_of(mechanism: int, salt: bytes, iterations: int, salted_password: bytes) -> Credential:
    """What is kept of a salted password (RFC 5802 section 3)."""
    digest = MECHANISMS[mechanism][1]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return Credential(salt, iterations, hashlib.new(digest, client_key).digest(),
                      hmac.new(salted_password, b"Server Key", digest).digest())


class ScramCredentials:
    """The server's SCRAM users, loaded from their file at construction (a file that does not
    parse is CorruptRecordError naming it: the server does not start on a guess)."""

    def __init__(self, data_dir: str):
        self.path = scram_credentials_file(data_dir)
        self._lock = threading.Lock()
        self._secret = secrets.token_bytes(32)  # the salts of names that have no credential
        self._users: dict[str, dict[int, Credential]] = {}
        try:
            with open(self.path, "rb") as f:
                raw = json.loads(f.read())
            for name, creds in raw["users"].items():
                if not creds:
                    raise ValueError(f"user {name!r} has no credential")
                self._users[name] = {
                    BY_NAME[mech]: Credential(base64.b64decode(c["salt"], validate=True), int(c["iterations"]),
                                              base64.b64decode(c["stored_key"], validate=True),
                                              base64.b64decode(c["server_key"], validate=True))
                    for mech, c in creds.items()}
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as e:
            raise E.CorruptRecordError(f"unreadable SCRAM credentials file {self.path}: {e!r}",
                                       path=self.path) from None

    def get(self, name: str, mechanism: int) -> Credential | None:
        return self._users.get(name, {}).get(mechanism)

    def decoy(self, name: str, mechanism: int) -> Credential:
        """A credential no password matches, stable for ``name`` while the process runs."""
        salt = hmac.new(self._secret, b"%d:" % mechanism + name.encode("utf-8", "replace"), "sha256").digest()
        return Credential(salt, MIN_ITERATIONS, secrets.token_bytes(64), secrets.token_bytes(64))

    def describe(self, names: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
        """[(user, error, message, [(mechanism, iterations)])]: every user for None or []."""
        users = self._users
        if not names:
            return [(n, K.NONE, None, sorted((m, c.iterations) for m, c in users[n].items())) for n in sorted(users)]
        out = []
        counts = Counter(names)
        for n in counts:
            if counts[n] > 1:
                out.append((n, K.DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the same user "
                                                     f"twice in a single request: {n}", []))
            elif n in users:
                out.append((n, K.NONE, None, sorted((m, c.iterations) for m, c in users[n].items())))
            else:
                out.append((n, K.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does "
                                                     f"not exist: {n}", []))
        return out

    def alter(self, deletions: list[tuple[str, int]], upsertions: list[tuple[str, int, int, bytes, bytes]]
              ) -> list[tuple[str, int, str | None]]:
        """Apply the valid alterations of one request together: [(user, error, message)]."""
        errors: dict[str, tuple[int, str]] = {}
        deletes: dict[str, int] = {}
        upserts: dict[str, tuple[int, int, bytes, bytes]] = {}
        with self._lock:
            users = self._users
            for name, mech in deletions:
                if name in errors:
                    continue
                if deletes.pop(name, None) is not None:
                    errors[name] = (K.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
                elif (bad := _check_name(name, mech)) is not None:
                    errors[name] = bad
                elif mech not in users.get(name, {}):
                    errors[name] = (K.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
                else:
                    deletes[name] = mech
            for name, mech, iterations, salt, salted in upsertions:
                if name in errors:
                    continue
                if deletes.pop(name, None) is not None or upserts.pop(name, None) is not None:
                    errors[name] = (K.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
                elif (bad := _check_upsertion(name, mech, iterations, salt, salted)) is not None:
                    errors[name] = bad
                else:
                    upserts[name] = (mech, iterations, salt, salted)
            new = {n: dict(c) for n, c in users.items()}
            for name, mech in deletes.items():
                del new[name][mech]
                if not new[name]:
                    del new[name]
            adding = [n for n in upserts if n not in users]
            if adding and len(new) + len(adding) > MAX_USERS:  # (before any credential is computed)
                for name in adding:
                    errors[name] = (K.UNACCEPTABLE_CREDENTIAL, f"at most {MAX_USERS} SCRAM users")
                upserts = {n: u for n, u in upserts.items() if n in users}
            for name, (mech, iterations, salt, salted) in upserts.items():
                new.setdefault(name, {})[mech] = credential_of(mech, salt, iterations, salted)
            done = [*deletes, *upserts]
            if done:
                try:
                    self._write(new)
                except E.VQSError as e:
                    code = K.KAFKA_STORAGE_ERROR if isinstance(e, E.DiskFullError) else K.UNKNOWN_SERVER_ERROR
                    return [(n, code, "the SCRAM credentials could not be written") for n in done] + \
                        [(n, c, m) for n, (c, m) in errors.items()]
                self._users = new
        return [(n, K.NONE, None) for n in done] + [(n, c, m) for n, (c, m) in errors.items()]

    def _write(self, users: dict) -> None:
        atomic_write(self.path, json.dumps({"users": {
            n: {MECHANISMS[m][0]: {"salt": _b64(c.salt), "iterations": c.iterations,
                                   "stored_key": _b64(c.stored_key), "server_key": _b64(c.server_key)}
                for m, c in sorted(creds.items())}
            for n, creds in sorted(users.items())}}, indent=1).encode())


def _check_name(name: str, mech: int) -> tuple[int, str] | None:
    if not name:
        return K.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if len(name) > MAX_NAME:
        return K.UNACCEPTABLE_CREDENTIAL, f"Username must be at most {MAX_NAME} characters"
    if mech not in MECHANISMS:
        return K.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(name: str, mech: int, iterations: int, salt: bytes, salted: bytes) -> tuple[int, str] | None:
    bad = _check_name(name, mech)
    if bad is not None:
        return bad
    if iterations < MIN_ITERATIONS:
        return K.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return K.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not 0 < len(salt) <= MAX_SALT:
        return K.UNACCEPTABLE_CREDENTIAL, f"The salt must be 1 to {MAX_SALT} bytes"
    size = hashlib.new(MECHANISMS[mech][1]).digest_size
    if len(salted) != size:
        return K.UNACCEPTABLE_CREDENTIAL, f"The salted password of {MECHANISMS[mech][0]} is {size} bytes"
    return None


# ---------------------------------------------------------------------- the exchange

class ScramFailed(Exception):
    """The exchange failed; the message is what the client is told."""


class ScramExchange:
    """The server's side of one SCRAM login: ``first`` takes the client-first message and
    answers the server-first one, ``final`` takes the client-final message and answers the
    server-final one; ``user`` is set once the proof is right. Any fault raises ScramFailed."""

    __slots__ = ("store", "mechanism", "digest", "nonce", "user", "_name", "_gs2", "_bare", "_server_first",
                 "_cred", "_known")

    def __init__(self, store: ScramCredentials, mechanism: str, nonce: str | None = None):
        self.store = store
        self.mechanism = BY_NAME[mechanism]
        self.digest = MECHANISMS[self.mechanism][1]
        self.nonce = nonce or secrets.token_urlsafe(24)
        self.user: str | None = None
        self._name = ""
        self._server_first = None

    @property
    def user_named(self) -> str:
        """The user the client named (set by ``first``; "" before), whether or not it proved it."""
        return self._name

    def first(self, msg: bytes) -> bytes:
        text = _text(msg)
        gs2, sep, bare = _split_gs2(text)
        parts = bare.split(",")
        if len(parts) < 2 or not parts[0].startswith("n=") or not parts[1].startswith("r="):
            raise ScramFailed("Invalid client first message")
        if any(p.startswith("tokenauth=") and p[10:].lower() == "true" for p in parts[2:]):
            raise ScramFailed("Delegation tokens are not supported")
        name, cnonce = _unescape(parts[0][2:]), parts[1][2:]
        self._name = name
        if not cnonce or not all(33 <= ord(ch) <= 126 and ch != "," for ch in cnonce):
            raise ScramFailed("Invalid client nonce")
        authzid = gs2.split(",")[1]
        if authzid and _unescape(authzid[2:]) != name:
            raise ScramFailed("Authentication failed: Client requested an authorization id that is different "
                              "from username")
        cred = self.store.get(name, self.mechanism)
        self._known = cred is not None
        self._cred = cred if cred is not None else self.store.decoy(name, self.mechanism)
        self.nonce = cnonce + self.nonce
        self._gs2, self._bare, self.user = gs2 + sep, bare, None
        self._server_first = f"r={self.nonce},s={_b64(self._cred.salt)},i={self._cred.iterations}"
        return self._server_first.encode()

    def final(self, msg: bytes) -> bytes:
        if self._server_first is None:
            raise ScramFailed("Unexpected client final message")
        text = _text(msg)
        head, sep, proof = text.rpartition(",p=")
        parts = head.split(",")
        if not sep or len(parts) < 2 or not parts[0].startswith("c=") or not parts[1].startswith("r="):
            raise ScramFailed("Invalid client final message")
        try:
            binding = base64.b64decode(parts[0][2:], validate=True)
            proof_bytes = base64.b64decode(proof, validate=True)
        except binascii.Error:
            raise ScramFailed("Invalid client final message") from None
        if binding != self._gs2.encode():
            raise ScramFailed("Invalid channel binding")
        if parts[1][2:] != self.nonce:
            raise ScramFailed("Invalid client nonce in the final client message.")
        auth_message = f"{self._bare},{self._server_first},{head}".encode()
        cred = self._cred
        signature = hmac.new(cred.stored_key, auth_message, self.digest).digest()
        if len(proof_bytes) != len(signature):
            raise ScramFailed("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof_bytes, signature))
        ok = hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), cred.stored_key)
        if not (ok and self._known):
            raise ScramFailed("Authentication failed: Invalid user credentials")
        self.user = self._name
        return b"v=" + base64.b64encode(hmac.new(cred.server_key, auth_message, self.digest).digest())


def _text(msg: bytes) -> str:
    if len(msg) > MAX_MESSAGE:
        raise ScramFailed(f"SCRAM message over {MAX_MESSAGE} bytes")
    try:
        return msg.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramFailed("SCRAM message is not UTF-8") from None


def _split_gs2(text: str) -> tuple[str, str, str]:
    """(gs2 header without its last comma, ",", client-first-bare)."""
    cb, c1, rest = text.partition(",")
    authz, c2, bare = rest.partition(",")
    if not (c1 and c2) or cb not in ("n", "y") or (authz and not authz.startswith("a=")):
        raise ScramFailed("Invalid client first message (channel binding is not supported)")
    return f"{cb},{authz}", ",", bare


def _unescape(saslname: str) -> str:
    """RFC 5802's saslname: "=2C" is ",", "=3D" is "=", any other "=" is invalid."""
    out = saslname.replace("=2C", ",").replace("=3D", "=")
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ScramFailed("Invalid user name")
    return out


# ---------------------------------------------------------------------- the admin APIs

async def describe_user_scram_credentials(ctx, conn, v, r):
    """DescribeUserScramCredentials v0 (flexible): every user for a null or empty list."""
    n = r.compact_nullable_array_len(2)
    names = None
    if n is not None:
        names = []
        for _ in range(n):
            names.append(r.compact_string() or "")
            r.tagged_fields()
    r.tagged_fields()
    if not A.cluster_allowed(ctx, conn, A.DESCRIBE):
        w = Writer().int32(0).int16(K.CLUSTER_AUTHORIZATION_FAILED)
        return bytes(w.compact_string("DESCRIBE on the cluster is not allowed").compact_array(0).tags().b)
    results = ctx.scram.describe(names)
    w = Writer().int32(0).int16(K.NONE).compact_string(None).compact_array(len(results))
    for user, err, msg, infos in results:
        w.compact_string(user).int16(err).compact_string(msg).compact_array(len(infos))
        for mech, iterations in infos:
            w.int8(mech).int32(iterations).tags()
        w.tags()
    return bytes(w.tags().b)


async def alter_user_scram_credentials(ctx, conn, v, r):
    """AlterUserScramCredentials v0 (flexible): answered once what it changed is on disk."""
    deletions = []
    for _ in range(r.compact_array_len(3)):
        deletions.append((r.compact_string() or "", r.int8()))
        r.tagged_fields()
    upsertions = []
    for _ in range(r.compact_array_len(9)):
        name, mech, iterations = r.compact_string() or "", r.int8(), r.int32()
        upsertions.append((name, mech, iterations, r.compact_bytes() or b"", r.compact_bytes() or b""))
        r.tagged_fields()
    r.tagged_fields()
    if A.cluster_allowed(ctx, conn, A.ALTER):
        results = await ctx.blocking(ctx.scram.alter, deletions, upsertions)
    else:  # each user named once, as the answer lists them
        names = dict.fromkeys([n for n, _ in deletions] + [u[0] for u in upsertions])
        results = [(n, K.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not allowed") for n in names]
    w = Writer().int32(0).compact_array(len(results))
    for user, err, msg in results:
        w.compact_string(user).int16(err).compact_string(msg).tags()
    return bytes(w.tags().b)


def mechanisms_offered(ctx) -> list[str]:
    """What SaslHandshake offers: PLAIN with tokens or Kafka users, SCRAM whenever the server
    requires authentication, OAUTHBEARER with a key set (a client that needs none is told of
    none)."""
    if not ctx.auth_required:
        return []
    return ((["PLAIN"] if ctx.tokens or ctx.users else []) + list(BY_NAME)
            + (["OAUTHBEARER"] if ctx.oauth is not None else []))

