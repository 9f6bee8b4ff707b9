"""The Kafka listener's TLS: its server context, and the principal a client certificate names.

With ``tls_cert``/``tls_key`` the listener speaks TLS only (Kafka's SSL and SASL_SSL security
protocols). With ``kafka_tls_client_ca`` as well, every client must present a certificate that a
CA of that PEM file signed, as Kafka's ``ssl.client.auth=required``: a client without one, or with
one the file's CAs did not sign (or expired), fails the handshake, which is bounded by
``kafka_frame_timeout_s`` as any handshake (listener.py), so such a client costs one handshake.

A connection whose certificate was verified is authenticated by it, as on Kafka's SSL listener (no
SASL needed), as ``User:<subject>``: the certificate's subject as Kafka's default principal builder
writes it (``ssl.principal.mapping.rules=DEFAULT``, X500Principal's RFC 2253 form): the most
specific name first, RDNs joined by ``,`` (the values of one RDN by ``+``), the keywords CN, L, ST,
O, OU, C, STREET, DC and UID, and ``, + " \\ < > ;``, a leading ``#`` or space and a trailing
space escaped with ``\\``; e.g. ``User:CN=alice,OU=eng,O=acme,C=DE``. (Kafka writes any other
attribute type as its OID and the value's DER in hex, ``1.2.840.113549.1.9.1=#16...``; here it
keeps OpenSSL's name and the value as text, ``emailAddress=a@example.com``.) A SASL login on such
a connection (SASL_SSL) makes its user the principal instead, as Kafka's SASL_SSL listener does.
"""

from __future__ import annotations

import ssl

from ... import errors as E

#: RFC 2253's keywords (OpenSSL's long name -> keyword), the ones Java's X500Principal writes
KEYWORDS = {"commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST", "organizationName": "O",
            "organizationalUnitName": "OU", "countryName": "C", "streetAddress": "STREET",
            "domainComponent": "DC", "userId": "UID"}
_SPECIAL = frozenset(',+"\\<>;')


def server_context(cert: str, key: str, client_ca: str = "") -> ssl.SSLContext:
    """The listener's TLS context (TLS 1.2 at least); with ``client_ca``, client certificates
    signed by its CAs required. ConfigError names the file that cannot be used."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.minimum_version = ssl.TLSVersion.TLSv1_2
    tls.load_cert_chain(cert, key)
    if client_ca:
        try:
            tls.load_verify_locations(cafile=client_ca)
        except (ssl.SSLError, OSError, ValueError) as e:
            raise E.ConfigError(f"kafka_tls_client_ca: cannot load CA certificates from {client_ca}: {e}") from None
        tls.verify_mode = ssl.CERT_REQUIRED
    return tls


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _SPECIAL else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def principal(peercert: dict | None) -> str | None:
    """``User:<subject DN>`` of a verified client certificate (``SSLObject.getpeercert()``), or
    None when the connection presented none."""
    subject = (peercert or {}).get("subject")
    if not subject:
        return None
    rdns = ("+".join(f"{KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(subject))
    return "User:" + ",".join(rdns)
