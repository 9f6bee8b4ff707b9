"""What every REST route shares: resource names, JSON responses, integer query
parameters, and the broker once it is open.

Invariants: a name in a path or body matches ``NAME_PATTERN`` and is never
``.`` or ``..`` (names become directory names); until the broker is open (and
again while the server stops) every route that needs it answers 503
``not_ready`` with ``Retry-After``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
from fastapi import Path, Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..context import ServerContext
from ..errors import APIError

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
#: a group member's id: its client id, a dash, a UUID (assigned_groups.py)
MEMBER_PATTERN = r"^[A-Za-z0-9._-]{1,300}$"
#: The longest a REST long poll waits (``wait_ms``), as SQS caps WaitTimeSeconds at 20 s:
#: the schema refuses more (400); the setting max_wait_ms may only lower it.
MAX_WAIT_MS = 20_000
_json_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_msgspec_decode = msgspec.json.Decoder().decode
_msgspec_encode = msgspec.json.Encoder().encode


_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")


def json_loads(body: bytes):
    """``json.loads(body)``, the same value, parsed by msgspec when it can (~10x faster on the
    hot routes). What msgspec refuses (NaN, a BOM, a UTF-16 body, a number too large for a
    float, invalid JSON) is parsed, or refused, by ``json.loads``, so every body gets
    ``json.loads``'s answer; except that a ValueError refuses what no UTF-8 text can hold or
    no request needs: a lone surrogate escape (``"\\ud800"``, which msgspec refuses too) and
    nesting deeper than the interpreter's recursion limit (both parsers stop there, having
    read no more than the body)."""
    try:
        return _msgspec_decode(body)
    except RecursionError:
        raise ValueError("the JSON document is nested too deeply") from None
    except Exception:
        pass
    try:
        doc = json.loads(body)
    except RecursionError:
        raise ValueError("the JSON document is nested too deeply") from None
    if _SURROGATE_ESCAPE.search(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")):
        _refuse_surrogates(doc)
    return doc


def _refuse_surrogates(doc) -> None:
    """ValueError if a string (value or key) of ``doc`` holds a lone surrogate (walked without
    recursion: ``doc`` may be nested as deep as the parser allows)."""
    stack = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("the JSON document has a lone surrogate escape (not a character)") from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


class BodyNotJSON(StarletteHTTPException):
    """A body ``json_loads`` refused for another reason than a syntax error (not UTF-8, a lone
    surrogate, nesting past the limit): an HTTP exception, which the framework passes on as it
    is, answered with ``api`` (``invalid_json``) by the app's handler. A syntax error is the
    framework's own ``json_invalid``, answered alike (app.py)."""

    def __init__(self, api: APIError):
        super().__init__(api.status, api.message)
        self.api = api


class _StrictJSONRequest(Request):
    """A request whose ``json()`` is ``json_loads``: a lone surrogate or nesting past the limit
    is refused (400 ``invalid_json``) before a route sees the body."""

    async def json(self):
        if not hasattr(self, "_json"):
            try:
                self._json = json_loads(await self.body())
            except json.JSONDecodeError:
                raise
            except ValueError as e:
                raise BodyNotJSON(json_error(e)) from None
        return self._json


class JSONRoute(APIRoute):
    """The REST routes' class: their JSON bodies are parsed by ``json_loads`` (see above)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def strict(request: Request):
            return await handler(_StrictJSONRequest(request.scope, request.receive))

        return strict


def links(status: int, description: str, **targets: tuple) -> dict:
    """OpenAPI ``links`` of one response (``responses=`` of a route): how its answer feeds the
    next call (what a client, or a stateful fuzzer, chains: create-topic -> produce -> consume).
    Each target is ``(method, path, parameters[, request_body])`` with runtime expressions
    (``$request.body#/name``, ``$response.body#/ranges/0/base_offset``)."""
    out = {}
    for name, (method, path, params, *body) in targets.items():
        link = {"operationRef": "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method}
        if params:
            link["parameters"] = params
        if body:
            link["requestBody"] = body[0]
        out[name] = link
    return {status: {"description": description, "links": out}}


_KINDS = {"int_parsing": "a whole number", "int_type": "a whole number", "int_from_float": "a whole number",
          "float_parsing": "a number", "float_type": "a number", "bool_parsing": "true or false",
          "bool_type": "true or false", "string_type": "a string", "dict_type": "an object",
          "list_type": "a list", "model_type": "an object", "model_attributes_type": "an object"}


def _shown(value) -> str:
    """A value a client sent, for an error message: its repr, at most 60 characters."""
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def validation_text(field: str | None, err: dict) -> str:
    """One pydantic validation error in the words of the API's own checks: a name's rule
    rather than its regex, a bound as "at most N", a length as "at most N characters" (the
    value given is named, shortened; a long string only by its length)."""
    what = field or "request"
    kind, ctx, given = err.get("type", ""), err.get("ctx") or {}, err.get("input")
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in (NAME_PATTERN, MEMBER_PATTERN):
        longest = 200 if ctx["pattern"] == NAME_PATTERN else 300
        return f"{what} {_shown(given)} is not a valid name: use 1-{longest} characters from [A-Za-z0-9._-]"
    for key, words in (("le", "at most"), ("lt", "less than"), ("ge", "at least"), ("gt", "more than")):
        if key in ctx and kind in ("less_than_equal", "less_than", "greater_than_equal", "greater_than"):
            return f"{what} must be {words} {ctx[key]}, not {_shown(given)}"
    if kind in ("string_too_long", "string_too_short"):
        words = "at most" if kind == "string_too_long" else "at least"
        bound = ctx.get("max_length" if kind == "string_too_long" else "min_length")
        return f"{what} must be {words} {bound} characters, not {len(given) if isinstance(given, str) else '?'}"
    if kind in ("too_long", "too_short"):
        words = "at most" if kind == "too_long" else "at least"
        bound = ctx.get("max_length" if kind == "too_long" else "min_length")
        return f"{what} must hold {words} {bound} item(s), not {ctx.get('actual_length', '?')}"
    if kind in _KINDS:
        return f"{what} must be {_KINDS[kind]}, not {_shown(given)}"
    if kind == "missing":
        return f"{what} is required"
    if kind == "extra_forbidden":
        return f"{what} is not a field of this request"
    return f"{what}: {err.get('msg', 'invalid')}"


def invalid_json(why: str, pos: int | None = None) -> APIError:
    """400 ``invalid_json``, every REST route's answer to a body that is not JSON: what is wrong
    and where (the character's position, from 0), field ``body``."""
    where = f" (at character {pos})" if isinstance(pos, int) else ""
    return APIError(400, "invalid_json", f"the body is not valid JSON: {why}{where}", field="body")


def json_error(e: ValueError) -> APIError:
    """``invalid_json`` for what ``json_loads`` raised."""
    if isinstance(e, json.JSONDecodeError):
        return invalid_json(e.msg, e.pos)
    if isinstance(e, UnicodeDecodeError):
        return invalid_json("it is not UTF-8 text", e.start)
    return invalid_json(str(e))


def validation_error(errors: list) -> dict:
    """The error body of a request the models refused: its first error, in words
    (``validation_text``), with the field it is about (``None``: the request)."""
    first = errors[0] if errors else {}
    loc = [str(x) for x in first.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "header"):  # where it was, not a field
        loc = loc[1:]
    field = ".".join(loc) or None
    return {"code": "invalid_argument", "message": validation_text(field, first), "field": field}


def name_param(kind: str):
    """A path parameter holding a ``kind`` name."""
    return Path(..., pattern=NAME_PATTERN, description=f"{kind} name: 1-200 of [A-Za-z0-9._-]")


def check_name(name: str, kind: str) -> str:
    if name in (".", ".."):
        raise APIError(400, "invalid_name", f"{kind} name may not be '.' or '..'", field="name")
    return name


def json_bytes(body: Any) -> bytes:
    """``body`` as compact JSON (non-ASCII text kept as UTF-8): every REST answer's encoding.
    msgspec encodes it (about a tenth of ``json.dumps``' time on the hot routes' answers, the
    same bytes for the dicts, lists, strings, ints and bools the answers hold; a float may be
    written in another exponent form, ``1e16`` for ``1e+16``, the same number); what msgspec
    refuses (a type it does not know, a dict key that is not a string or a number, a lone
    surrogate) is ``json.dumps``' to encode or refuse, as before."""
    try:
        return _msgspec_encode(body)
    except (TypeError, ValueError, msgspec.EncodeError):
        return _json_dumps(body).encode("utf-8")


def jresp(body: Any, status: int = 200, headers: dict | None = None) -> Response:
    """A compact JSON response (non-ASCII text kept as UTF-8; ``json_bytes``)."""
    return Response(json_bytes(body), status_code=status, media_type="application/json", headers=headers)


def ready_broker(ctx: ServerContext):
    """The open broker, or 503 not_ready."""
    b = ctx.broker
    if b is None or not ctx.ready:
        raise APIError(503, "not_ready", "the server is not ready", headers={"Retry-After": "1"})
    return b


def query_int(q, name: str, default, lo: int, hi: int):
    """Integer query parameter ``name`` of mapping ``q`` in [lo, hi] (``default`` when absent)."""
    v = q.get(name)
    if v is None or v == "":
        return default
    try:
        i = int(v)
    except ValueError:
        raise APIError(400, "invalid_argument", f"query parameter {name} must be an integer, not {v!r}", field=name) from None
    if not (lo <= i <= hi):
        raise APIError(400, "invalid_argument", f"query parameter {name} must be between {lo} and {hi}", field=name)
    return i
