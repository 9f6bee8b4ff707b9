"""The Kafka listener's TLS: its server context, and the principal a client certificate names.

With ``tls_cert``/``tls_key`` the listener speaks TLS only (Kafka's SSL and SASL_SSL security
protocols). With ``kafka_tls_client_ca`` as well, every client must present a certificate that a
CA of that PEM file signed, as Kafka's ``ssl.client.auth=required``: a client without one, or with
one the file's CAs did not sign (or expired), fails the handshake, which is bounded by
``kafka_frame_timeout_s`` as any handshake (listener.py), so such a client costs one handshake.
With ``kafka_tls_client_auth=requested`` (Kafka's ``ssl.client.auth=requested``) a client may
present none: it then logs in with SASL as on a listener without client certificates (or is
``User:ANONYMOUS`` on a server without credentials); one it presents must still verify. One
port then serves both Kafka's SSL clients and its SASL_SSL ones.

A connection whose certificate was verified is authenticated by it, as on Kafka's SSL listener (no
SASL needed), as ``User:<subject>``: the certificate's subject as Kafka's default principal builder
writes it (``ssl.principal.mapping.rules=DEFAULT``, X500Principal's RFC 2253 form): the most
specific name first, RDNs joined by ``,`` (the values of one RDN by ``+``), the keywords CN, L, ST,
O, OU, C, STREET, DC and UID, and ``, + " \\ < > ;``, a leading ``#`` or space and a trailing
space escaped with ``\\``; e.g. ``User:CN=alice,OU=eng,O=acme,C=DE``. (Kafka writes any other
attribute type as its OID and the value's DER in hex, ``1.2.840.113549.1.9.1=#16...``; here it
keeps OpenSSL's name and the value as text, ``emailAddress=a@example.com``.) A SASL login on such
a connection (SASL_SSL) makes its user the principal instead, as Kafka's SASL_SSL listener does.

``kafka_tls_principal_mapping_rules`` maps that subject to a shorter name as Kafka's
``ssl.principal.mapping.rules`` does (``PrincipalMapper``): rules tried in order, ``DEFAULT``
(the subject as it is) or ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` (lower
or upper case the result), separated by commas; a rule applies when its pattern matches the
whole subject, and its result is the subject with every match of the pattern replaced
(``$1``: a group; a backslash: the next character as it is). A subject no rule applies to is refused:
its connection is closed, as Kafka fails its authentication. Patterns are Python's ``re``
syntax, which covers what Kafka's documentation shows.
"""

from __future__ import annotations

import re
import ssl

from ... import errors as E

#: RFC 2253's keywords (OpenSSL's long name -> keyword), the ones Java's X500Principal writes
KEYWORDS = {"commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST", "organizationName": "O",
            "organizationalUnitName": "OU", "countryName": "C", "streetAddress": "STREET",
            "domainComponent": "DC", "userId": "UID"}
_SPECIAL = frozenset(',+"\\<>;')


def server_context(cert: str, key: str, client_ca: str = "", client_auth: str = "required") -> ssl.SSLContext:
    """The listener's TLS context (TLS 1.2 at least); with ``client_ca``, client certificates
    signed by its CAs ``required`` or ``requested`` (one presented must be signed by them).
    ConfigError names the file or setting that cannot be used."""
    if client_auth not in ("required", "requested"):
        raise E.ConfigError(f"kafka_tls_client_auth must be required or requested, not {client_auth!r}")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.minimum_version = ssl.TLSVersion.TLSv1_2
    tls.load_cert_chain(cert, key)
    if client_ca:
        try:
            tls.load_verify_locations(cafile=client_ca)
        except (ssl.SSLError, OSError, ValueError) as e:
            raise E.ConfigError(f"kafka_tls_client_ca: cannot load CA certificates from {client_ca}: {e}") from None
        tls.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return tls


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _SPECIAL else c for c in value)
    if value.startswith(("#", " ")):
        out = "\\" + out
    if value.endswith(" ") and len(value) > 1:  # (a lone space is escaped once, as leading)
        out = out[:-1] + "\\ "
    return out


def subject(peercert: dict | None) -> str | None:
    """The subject of a verified client certificate (``SSLObject.getpeercert()``) as Kafka writes
    it (module doc), or None when the connection presented none."""
    rdns = (peercert or {}).get("subject")
    if not rdns:
        return None
    return ",".join("+".join(f"{KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(rdns))


# Kafka's SslPrincipalMapper grammar: a rule, then a comma or the end; a rule that does not
# parse whole is refused (its unparsed rest named)
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class PrincipalMapper:
    """``kafka_tls_principal_mapping_rules`` (module doc): ``name(subject)`` is the principal's
    name, or None when no rule applies. ConfigError names a rule that does not parse."""

    def __init__(self, rules: str = "DEFAULT"):
        self.rules: list = []  # None (DEFAULT) or (compiled pattern, replacement, case)
        for m in _SPLITTER.finditer(rules.strip()):
            rule = m.group(1)
            p = _PARSER.match(rule)
            if p.end() != len(rule):
                raise E.ConfigError(f"kafka_tls_principal_mapping_rules: invalid rule {rule!r} "
                                    f"(unparsed: {rule[p.end():]!r})")
            if p.group(1):
                self.rules.append(None)
            elif p.group(2) is not None:
                try:
                    pattern = re.compile(p.group(2))
                except re.error as e:
                    raise E.ConfigError(f"kafka_tls_principal_mapping_rules: rule {rule!r}: {e}") from None
                self.rules.append((pattern, p.group(3), p.group(4)))

    def name(self, subject: str) -> str | None:
        for rule in self.rules:
            if rule is None:
                return subject
            pattern, replacement, case = rule
            if pattern.fullmatch(subject) is None:
                continue
            out = pattern.sub(lambda m, r=replacement: _expand(m, r), subject)
            return out.lower() if case == "L" else out.upper() if case == "U" else out
        return None


def _expand(m: re.Match, replacement: str) -> str:
    """Java's replacement syntax: ``$n`` a group (further digits while they name one; a group
    the pattern lacks stays literal, as Kafka escapes it), ``${name}``, ``\\x`` the character x."""
    out, i, n, groups = [], 0, len(replacement), m.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{" and (j := replacement.find("}", i)) > 0:
            out.append(m.group(replacement[i + 2:j]) or "")
            i = j + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit() and 0 < int(replacement[i + 1]) <= groups:
            g, i = int(replacement[i + 1]), i + 2
            while i < n and replacement[i].isdigit() and g * 10 + int(replacement[i]) <= groups:
                g, i = g * 10 + int(replacement[i]), i + 1
            out.append(m.group(g) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
