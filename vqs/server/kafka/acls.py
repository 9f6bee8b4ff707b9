"""ACLs for the Kafka listener's principals: Kafka's authorizer model (its StandardAuthorizer),
the admin APIs DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), and the one question
every handler asks, ``allowed(conn, operation, resource type, name)``.

An ACL binds a resource pattern (a type; a name, LITERAL or PREFIXED, ``*`` a literal
wildcard) to an entry (a principal ``User:<name>``, ``User:*`` any; a host, ``*`` any; an
operation, ALL any; ALLOW or DENY). As Kafka decides:

- a super user (``kafka_super_users``, and whoever logs in with one of the server's tokens)
  may do everything;
- a DENY that matches the principal, host and operation (or ALL) wins;
- else an ALLOW that matches them allows; READ, WRITE, DELETE and ALTER imply DESCRIBE, and
  ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- a resource no ACL names at all is open to every principal while
  ``kafka_allow_if_no_acl`` holds (the default, Kafka's ``allow.everyone.if.no.acl.found``:
  a server without ACLs keeps working), closed otherwise.

A connection's principal is ``User:<name>`` of its SASL login (PLAIN with ``kafka_users``,
SCRAM, OAUTHBEARER), else ``User:<subject>`` of its verified client certificate (tls.py), or
``User:ANONYMOUS`` where the server needs no login; its host is the client's address.

Invariants:

- ``Acls`` is the only writer of its file (``DATA/kafka_acls.json``, docs/FORMAT.md); a
  creation or deletion is answered after the file holding it is replaced atomically and
  fsynced; the bindings of one request land together.
- Bounded before anything is kept: at most ``MAX_ACLS`` bindings, strings of at most
  ``MAX_STRING`` characters; a CreateAcls request keeps at most ``MAX_ACLS`` of its
  creations and a DeleteAcls request acts on at most ``MAX_FILTERS`` filters (the rest are
  answered with an error, never held); a check costs one dict lookup per literal name and
  one per prefix length in use, never a scan of every binding.
- With no binding at all, ``allowed`` answers True at once: a server that uses no ACLs pays
  one attribute test per check.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from typing import NamedTuple

from ... import errors as E
from ...broker.layout import kafka_acls_file
from ...storage import atomic_write
from . import errors as K
from .codec import Flex, Writer

# Kafka's enums (org.apache.kafka.common.resource / acl), by wire code.
R_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = frozenset((TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER))
P_ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
OP_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
OPERATIONS = frozenset(range(2, 16))  # ALL .. TWO_PHASE_COMMIT
PERM_ANY, DENY, ALLOW = 1, 2, 3
WILDCARD = "*"
ANY_USER = "User:*"
ANONYMOUS = "User:ANONYMOUS"
CLUSTER_NAME = "kafka-cluster"
#: the operations Kafka defines on each resource type (KIP-430's authorized operations)
RESOURCE_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE),
}
_IMPLIED = {DESCRIBE: (READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (ALTER_CONFIGS,)}
MAX_ACLS = 10_000
MAX_STRING = 1024
#: DeleteAcls filters acted on per request (each is matched against every binding); the
#: others are answered INVALID_REQUEST
MAX_FILTERS = 100


class Refused(Exception):
    """An authorization failure met inside a handler's loop over resources: its error code."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class Acl(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


class AclFilter(NamedTuple):
    """A DescribeAcls or DeleteAcls filter; None (name, principal, host) matches anything."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def invalid(self) -> str | None:
        """Why the filter is refused (an UNKNOWN or out-of-range code), or None."""
        if self.resource_type != R_ANY and self.resource_type not in RESOURCE_TYPES:
            return f"unknown resource type {self.resource_type}"
        if self.pattern_type not in (P_ANY, MATCH, LITERAL, PREFIXED):
            return f"unknown pattern type {self.pattern_type}"
        if self.operation != OP_ANY and self.operation not in OPERATIONS:
            return f"unknown operation {self.operation}"
        if self.permission not in (PERM_ANY, DENY, ALLOW):
            return f"unknown permission type {self.permission}"
        return None

    def matches(self, a: Acl) -> bool:
        """Kafka's ResourcePatternFilter.matches and AccessControlEntryFilter.matches."""
        if self.resource_type not in (R_ANY, a.resource_type):
            return False
        if self.pattern_type not in (P_ANY, MATCH, a.pattern_type):
            return False
        if self.name is not None:
            if self.pattern_type in (P_ANY, a.pattern_type):
                if self.name != a.name:
                    return False
            elif a.pattern_type == LITERAL:  # MATCH: the bindings that would apply to the name
                if a.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(a.name):
                return False
        return ((self.principal is None or self.principal == a.principal)
                and (self.host is None or self.host == a.host)
                and self.operation in (OP_ANY, a.operation)
                and self.permission in (PERM_ANY, a.permission))


def invalid_binding(a: Acl) -> str | None:
    """Why a new binding is refused (Kafka's AclControlManager.validateNewAcl), or None."""
    if a.resource_type not in RESOURCE_TYPES:
        return f"Invalid resourceType {a.resource_type}"
    if a.pattern_type not in (LITERAL, PREFIXED):
        return f"Invalid patternType {a.pattern_type}"
    if a.operation not in OPERATIONS:
        return f"Invalid operation {a.operation}"
    if a.permission not in (DENY, ALLOW):
        return f"Invalid permissionType {a.permission}"
    if not a.name:
        return "Resource name should not be empty"
    if ":" not in a.principal:
        return (f"Could not parse principal from `{a.principal}` (no colon is present separating the "
                "principal type from the principal name)")
    if max(len(a.name), len(a.principal), len(a.host)) > MAX_STRING:
        return f"a resource name, principal or host is longer than {MAX_STRING} characters"
    return None


class Acls:
    """The server's ACLs, loaded from their file at construction (a file that does not parse
    is CorruptRecordError naming it: the server does not start on a guess)."""

    def __init__(self, data_dir: str, super_users=(), allow_if_no_acl: bool = True):
        self.path = kafka_acls_file(data_dir)
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._lock = threading.Lock()
        self._acls: dict[Acl, None] = {}  # (ordered: creation order)
        self.generation = -1
        try:
            with open(self.path, "rb") as f:
                raw = json.loads(f.read())
            for d in raw["acls"]:
                a = Acl(int(d["resource_type"]), str(d["name"]), int(d["pattern_type"]), str(d["principal"]),
                        str(d["host"]), int(d["operation"]), int(d["permission"]))
                if (why := invalid_binding(a)) is not None:
                    raise ValueError(why)
                self._acls[a] = None
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise E.CorruptRecordError(f"unreadable ACL file {self.path}: {e!r}", path=self.path) from None
        self._index()

    def _index(self) -> None:
        literal: dict[tuple[int, str], list[Acl]] = defaultdict(list)
        prefixed: dict[tuple[int, str], list[Acl]] = defaultdict(list)
        lengths: dict[int, set[int]] = defaultdict(set)
        for a in self._acls:
            if a.pattern_type == LITERAL:
                literal[(a.resource_type, a.name)].append(a)
            else:
                prefixed[(a.resource_type, a.name)].append(a)
                lengths[a.resource_type].add(len(a.name))
        self._literal, self._prefixed = dict(literal), dict(prefixed)
        self._lengths = {t: sorted(ns) for t, ns in lengths.items()}
        self.any = bool(self._acls)
        self.generation += 1  # a new set of bindings in force (DescribableTopics asks again)

    def _save(self, acls: dict[Acl, None]) -> None:
        atomic_write(self.path, json.dumps({"acls": [a._asdict() for a in acls]}, indent=1).encode())

    # -- the admin APIs ------------------------------------------------------------

    def create(self, bindings: list[Acl]) -> list[tuple[int, str | None]]:
        """Add the valid bindings of one request together: [(error, message)] in order. A
        binding already present succeeds without a second copy."""
        with self._lock:
            new = dict(self._acls)
            results = []
            for a in bindings:
                why = invalid_binding(a)
                if why is None and a not in new and len(new) >= MAX_ACLS:
                    results.append((K.POLICY_VIOLATION, f"the server keeps at most {MAX_ACLS} ACLs"))
                elif why is not None:
                    results.append((K.INVALID_REQUEST, why))
                else:
                    new[a] = None
                    results.append((K.NONE, None))
            self._replace(new)
            return results

    def describe(self, flt: AclFilter) -> list[Acl]:
        return [a for a in self._acls if flt.matches(a)]

    def delete(self, filters: list[AclFilter]) -> list[tuple[int, str | None, list[Acl]]]:
        """Remove what each filter matches, all filters together: [(error, message, removed)]."""
        with self._lock:
            new = dict(self._acls)
            results = []
            for flt in filters:
                why = flt.invalid()
                if why is not None:
                    results.append((K.INVALID_REQUEST, why, []))
                    continue
                gone = [a for a in new if flt.matches(a)]
                for a in gone:
                    del new[a]
                results.append((K.NONE, None, gone))
            self._replace(new)
            return results

    def _replace(self, new: dict[Acl, None]) -> None:
        """Put ``new`` in force once it is on disk (under ``_lock``); nothing if it changes nothing."""
        if len(new) != len(self._acls):
            self._save(new)
            self._acls = new
            self._index()

    # -- authorization ---------------------------------------------------------------

    def _bound(self, rtype: int, name: str) -> list[Acl]:
        """Every binding whose pattern covers the resource (literal name, wildcard, prefixes)."""
        out = self._literal.get((rtype, name), []) + self._literal.get((rtype, WILDCARD), [])
        for n in self._lengths.get(rtype, ()):
            if n > len(name):
                break
            out += self._prefixed.get((rtype, name[:n]), [])
        return out

    def authorize(self, principal: str, host: str, operation: int, rtype: int, name: str) -> bool:
        if not self.any or principal in self.super_users:
            return True
        bound = self._bound(rtype, name)
        if not bound:
            return self.allow_if_no_acl
        implied = _IMPLIED.get(operation, ())
        allowed = False
        for a in bound:
            if a.principal not in (principal, ANY_USER) or a.host not in (host, WILDCARD):
                continue
            if a.permission == DENY:
                if a.operation in (operation, ALL):
                    return False
            elif a.operation in (operation, ALL) or a.operation in implied:
                allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: int, rtype: int) -> bool:
        """May the principal do ``operation`` on some resource of ``rtype`` (Kafka's
        authorizeByResourceType, for InitProducerId): an ALLOW for it on that type, or no
        binding of the type while ``allow_if_no_acl`` holds."""
        if not self.any or principal in self.super_users:
            return True
        typed = [a for a in self._acls if a.resource_type == rtype]
        if not typed:
            return self.allow_if_no_acl
        return any(a.permission == ALLOW and a.principal in (principal, ANY_USER) and a.host in (host, WILDCARD)
                   and a.operation in (operation, ALL) for a in typed)


# ---------------------------------------------------------------------- the connection's side

def principal_of(conn) -> tuple[str, str]:
    """(principal, host) of a connection (module doc)."""
    peer = conn.peer
    return conn.principal or ANONYMOUS, peer[0] if isinstance(peer, tuple) and peer else ""


class DescribableTopics:
    """A connection's view of topic names: of a set, those its principal may DESCRIBE (what a
    KIP-848 member's pattern matches is cut to it, as Kafka does since KAFKA-18813). The answer
    for a set is kept until the set or the ACLs change (a group's heartbeats ask again and again
    for the same matches)."""

    __slots__ = ("_acls", "_principal", "_host", "_key", "_seen")

    def __init__(self, acls: Acls, principal: str, host: str):
        self._acls, self._principal, self._host = acls, principal, host
        self._key: tuple | None = None
        self._seen: frozenset = frozenset()

    def __call__(self, topics: frozenset) -> frozenset:
        acls = self._acls
        if not acls.any:
            return topics
        key = (topics, acls.generation)
        if key != self._key:
            p, h = self._principal, self._host
            self._seen = frozenset(t for t in topics if acls.authorize(p, h, DESCRIBE, TOPIC, t))
            self._key = key
        return self._seen


def describable(ctx, conn) -> DescribableTopics | None:
    """The connection's DescribableTopics (made once; None for a super user, who sees all)."""
    if conn.super_user:
        return None
    if conn.topic_view is None:
        conn.topic_view = DescribableTopics(ctx.acls, *principal_of(conn))
    return conn.topic_view


def allowed(ctx, conn, operation: int, rtype: int, name: str) -> bool:
    """Whether the connection's principal may do ``operation`` on the resource."""
    acls = ctx.acls
    if not acls.any or conn.super_user:
        return True
    principal, host = principal_of(conn)
    return acls.authorize(principal, host, operation, rtype, name)


def operations(ctx, conn, rtype: int, name: str) -> int:
    """The authorized-operations bit field of a resource for this connection (KIP-430)."""
    return sum(1 << op for op in RESOURCE_OPERATIONS[rtype] if allowed(ctx, conn, op, rtype, name))


def allowed_on_any(ctx, conn, operation: int, rtype: int) -> bool:
    """Whether the principal may do ``operation`` on some resource of ``rtype`` (Acls.authorize_any)."""
    acls = ctx.acls
    if not acls.any or conn.super_user:
        return True
    principal, host = principal_of(conn)
    return acls.authorize_any(principal, host, operation, rtype)


def cluster_allowed(ctx, conn, operation: int) -> bool:
    return allowed(ctx, conn, operation, CLUSTER, CLUSTER_NAME)


def may_create_topic(ctx, conn, name: str) -> bool:
    """CreateTopics and auto-creation: CREATE on the cluster or on the topic (as Kafka)."""
    return cluster_allowed(ctx, conn, CREATE) or allowed(ctx, conn, CREATE, TOPIC, name)


# ---------------------------------------------------------------------- the admin APIs

def _read_filter(f: Flex, v: int) -> AclFilter:
    r = f.r
    rtype = r.int8()
    name = f.nullable_string()
    pattern = r.int8() if v >= 1 else LITERAL
    principal, host = f.nullable_string(), f.nullable_string()
    return AclFilter(rtype, name, pattern, principal, host, r.int8(), r.int8())


async def describe_acls(ctx, conn, v, r):
    """DescribeAcls 0-3 (flexible from 2): the bindings a filter matches, by resource pattern."""
    f = Flex(r, v >= 2)
    flt = _read_filter(f, v)
    f.tags()
    w = Writer().int32(0)
    why = flt.invalid()
    if not cluster_allowed(ctx, conn, DESCRIBE):
        code, why, found = K.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is not allowed", []
    elif why is not None:
        code, found = K.INVALID_REQUEST, []
    else:
        code, found = K.NONE, ctx.acls.describe(flt)
    f.w_string(w.int16(code), why)
    by_pattern: dict[tuple[int, str, int], list[Acl]] = {}
    for a in found:
        by_pattern.setdefault((a.resource_type, a.name, a.pattern_type), []).append(a)
    f.w_array(w, len(by_pattern))
    for (rtype, name, pattern), acls in by_pattern.items():
        f.w_string(w.int8(rtype), name)
        if v >= 1:
            w.int8(pattern)
        f.w_array(w, len(acls))
        for a in acls:
            f.w_string(f.w_string(w, a.principal), a.host).int8(a.operation).int8(a.permission)
            f.w_tags(w)
        f.w_tags(w)
    return bytes(f.w_tags(w).b)


async def create_acls(ctx, conn, v, r):
    """CreateAcls 0-3 (flexible from 2): answered once the bindings are on disk."""
    f = Flex(r, v >= 2)
    bindings = []
    n = f.array_len(8)
    for _ in range(n):
        rtype, name = r.int8(), f.string()
        pattern = r.int8() if v >= 1 else LITERAL
        principal, host = f.string(), f.string()
        op, perm = r.int8(), r.int8()
        if len(bindings) < MAX_ACLS:  # (more could not be kept anyway: not held)
            bindings.append(Acl(rtype, name, pattern, principal, host, op, perm))
        f.tags()
    f.tags()
    if cluster_allowed(ctx, conn, ALTER):
        results = await ctx.blocking(ctx.acls.create, bindings)
    else:
        results = [(K.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not allowed")] * len(bindings)
    results += [(K.POLICY_VIOLATION, f"the server keeps at most {MAX_ACLS} ACLs")] * (n - len(bindings))
    w = f.w_array(Writer().int32(0), len(results))
    for code, msg in results:
        f.w_tags(f.w_string(w.int16(code), msg))
    return bytes(f.w_tags(w).b)


async def delete_acls(ctx, conn, v, r):
    """DeleteAcls 0-3 (flexible from 2): each filter's matching bindings, removed together."""
    f = Flex(r, v >= 2)
    filters = []
    n = f.array_len(8)
    for _ in range(n):
        flt = _read_filter(f, v)
        if len(filters) < MAX_FILTERS:
            filters.append(flt)
        f.tags()
    f.tags()
    if cluster_allowed(ctx, conn, ALTER):
        results = await ctx.blocking(ctx.acls.delete, filters)
    else:
        results = [(K.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not allowed", [])] * len(filters)
    results += [(K.INVALID_REQUEST, f"at most {MAX_FILTERS} filters a request", [])] * (n - len(filters))
    w = f.w_array(Writer().int32(0), len(results))
    for code, msg, gone in results:
        f.w_array(f.w_string(w.int16(code), msg), len(gone))
        for a in gone:
            f.w_string(w.int16(K.NONE), None)
            f.w_string(w.int8(a.resource_type), a.name)
            if v >= 1:
                w.int8(a.pattern_type)
            f.w_string(f.w_string(w, a.principal), a.host).int8(a.operation).int8(a.permission)
            f.w_tags(w)
        f.w_tags(w)
    return bytes(f.w_tags(w).b)
