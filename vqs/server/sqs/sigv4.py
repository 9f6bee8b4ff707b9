"""AWS Signature Version 4 verification (header and presigned-query forms).

The server recomputes the signature from the request as received, with the
secret it knows for the access key id, exactly as botocore's ``SigV4Auth``
builds it: canonical request (method, URI-encoded path, sorted query, the
signed headers lower-cased and trimmed, the payload's SHA-256), string to sign
(algorithm, timestamp, scope, hash of the canonical request), and the derived
key ``HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service), "aws4_request")``.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
#: AWS's longest presigned URL: 7 days
MAX_EXPIRES_S = 604800
_AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<cred>[^,\s]+)\s*,\s*SignedHeaders=(?P<sh>[^,\s]+)\s*,\s*Signature=(?P<sig>[0-9a-fA-F]+)\s*$"
)
_SPACES = re.compile(r"\s+")


class SigV4Error(Exception):
    """Verification failed; ``code`` is AWS's error code, ``status`` the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 403):
        self.code = code
        self.status = status
        super().__init__(message)


@dataclass
class SigV4Identity:
    access_key: str
    region: str
    service: str
    date: str


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    k = _hmac(("AWS4" + secret).encode("utf-8"), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def _canonical_uri(raw_path: str) -> str:
    # botocore quotes the already-encoded path again (non-S3 services double-encode)
    path = raw_path or "/"
    if "/." in path:
        import posixpath

        trail = path.endswith("/")
        path = posixpath.normpath(path) + ("/" if trail and path != "/" else "")
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
    return quote(path, safe="/~")


def _canonical_query(raw_query: str, drop_signature: bool) -> str:
    pairs = []
    if raw_query:
        for part in raw_query.split("&"):
            if not part:
                continue
            k, _, v = part.partition("=")
            if drop_signature and k == "X-Amz-Signature":
                continue
            pairs.append((k, v))  # as sent, the way botocore signs them
    pairs.sort()
    return "&".join(f"{k}={v}" for k, v in pairs)


def parse_timestamp(amz_date: str) -> float:
    try:
        return calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise SigV4Error("IncompleteSignature", f"X-Amz-Date {amz_date!r} is not of the form YYYYMMDD'T'HHMMSS'Z'", 400) from None


def verify(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: dict[str, str],
    body: bytes,
    secrets: dict[str, str],
    max_skew_s: float = 900,
    now: float | None = None,
) -> SigV4Identity:
    """Verify a request's SigV4 signature; return who signed it, or raise SigV4Error.

    ``headers`` maps lower-case names to values (repeated headers joined by ',').
    """
    now = time.time() if now is None else now
    auth = headers.get("authorization")
    presigned = False
    if auth:
        if not auth.startswith(ALGORITHM):
            raise SigV4Error("IncompleteSignature", "Authorization header must use AWS4-HMAC-SHA256", 400)
        m = _AUTH_RE.match(auth.strip())
        if not m:
            raise SigV4Error(
                "IncompleteSignature",
                "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters",
                400,
            )
        credential, signed_headers, signature = m.group("cred"), m.group("sh"), m.group("sig")
        amz_date = headers.get("x-amz-date") or ""
        if not amz_date:
            raise SigV4Error("IncompleteSignature", "the request has no X-Amz-Date header", 400)
    else:
        q = {}
        for part in (raw_query or "").split("&"):
            k, _, v = part.partition("=")
            q[unquote(k)] = unquote(v.replace("+", " "))
        if q.get("X-Amz-Algorithm") != ALGORITHM or "X-Amz-Signature" not in q:
            raise SigV4Error(
                "MissingAuthenticationToken",
                "Request is missing Authentication Token (sign it with SigV4)",
                403,
            )
        presigned = True
        credential = q.get("X-Amz-Credential", "")
        signed_headers = q.get("X-Amz-SignedHeaders", "")
        signature = q["X-Amz-Signature"]
        amz_date = q.get("X-Amz-Date", "")
        expires = q.get("X-Amz-Expires")
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise SigV4Error("IncompleteSignature", f"credential {credential!r} is not AKID/date/region/service/aws4_request", 400)
    akid, date, region, service, _ = parts
    if service != SERVICE:
        raise SigV4Error("SignatureDoesNotMatch", f"Credential should be scoped to correct service: '{SERVICE}'.", 403)
    secret = secrets.get(akid)
    if secret is None:
        raise SigV4Error("InvalidClientTokenId", "The security token included in the request is invalid.", 403)
    ts = parse_timestamp(amz_date)
    if not amz_date.startswith(date):
        raise SigV4Error("SignatureDoesNotMatch", "the credential scope date does not match X-Amz-Date", 403)
    if presigned:
        try:
            exp = int(expires) if expires else 900
        except ValueError:
            raise SigV4Error("AuthorizationQueryParametersError", "X-Amz-Expires must be an integer", 400) from None
        if not 1 <= exp <= MAX_EXPIRES_S:
            raise SigV4Error("AuthorizationQueryParametersError",
                             f"X-Amz-Expires must be 1-{MAX_EXPIRES_S} seconds (7 days), not {exp}", 400)
        if now > ts + exp:
            raise SigV4Error("RequestExpired", "Request has expired.", 403)
        if ts - now > max_skew_s:
            raise SigV4Error("RequestExpired", f"Signature not yet current: {amz_date} is more than "
                             f"{int(max_skew_s)} seconds after the server's time.", 403)
    elif abs(now - ts) > max_skew_s:
        raise SigV4Error(
            "RequestExpired",
            f"Signature expired: {amz_date} is more than {int(max_skew_s)} seconds from the server's time.",
            403,
        )
    names = signed_headers.split(";")
    if "host" not in names:
        raise SigV4Error("SignatureDoesNotMatch", "the 'host' header must be signed", 403)
    if "x-amz-target" in headers and "x-amz-target" not in names:  # it names the action
        raise SigV4Error("SignatureDoesNotMatch", "the 'x-amz-target' header must be signed", 403)
    canon_headers = []
    for n in names:
        v = headers.get(n)
        if v is None:
            raise SigV4Error("SignatureDoesNotMatch", f"signed header {n!r} is not in the request", 403)
        canon_headers.append(f"{n}:{_SPACES.sub(' ', v.strip())}\n")
    # What is acted on is signed: the body by its SHA-256, as botocore signs it (presigned
    # too). An unsigned payload (S3's presigning) is taken only for a presigned request
    # without a body, whose parameters are all in its signed URL: a body added to a
    # presigned URL never counts.
    body_hash = hashlib.sha256(body).hexdigest()
    payload_hash = headers.get("x-amz-content-sha256")
    if payload_hash == "UNSIGNED-PAYLOAD" and (not presigned or body):
        raise SigV4Error("SignatureDoesNotMatch", "the request body must be signed (its SHA-256), not "
                         "UNSIGNED-PAYLOAD", 403)
    if payload_hash and payload_hash != "UNSIGNED-PAYLOAD" and payload_hash != body_hash:
        raise SigV4Error("SignatureDoesNotMatch", "x-amz-content-sha256 does not match the body", 403)
    hashes = [payload_hash or body_hash]
    if presigned and not payload_hash and not body:
        hashes.append("UNSIGNED-PAYLOAD")
    scope = f"{date}/{region}/{service}/aws4_request"
    key = signing_key(secret, date, region, service)
    head = [method.upper(), _canonical_uri(raw_path), _canonical_query(raw_query, drop_signature=presigned),
            "".join(canon_headers), signed_headers]
    ok = False
    for h in hashes:
        canonical_request = "\n".join([*head, h])
        string_to_sign = "\n".join(
            [ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()])
        expected = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
        ok |= hmac.compare_digest(expected, signature.lower())
    if not ok:
        raise SigV4Error(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
            403,
        )
    return SigV4Identity(akid, region, service, date)


def region_from_authorization(headers: dict[str, str]) -> str | None:
    """The region of an Authorization header's credential scope, unverified (for ARNs)."""
    auth = headers.get("authorization", "")
    i = auth.find("Credential=")
    if i < 0:
        return None
    parts = auth[i + 11 :].split(",", 1)[0].split("/")
    return parts[2] if len(parts) == 5 else None
