"""The reference server as an ASGI app: every catalog operation, one handler.

``POST /core.v1.<Service>/<Operation>`` runs the operation of that path in
``catalog.BY_PATH``; nothing here is specific to one operation.  A request
passes these checks in order, the first failure answering:

1. 401 unauthorized: no ``X-API-KEY``, or one that is neither an
   ``api_keys`` nor a ``viewer_keys`` key (no ``api_keys`` at all: any
   non-empty key is a full key, as for the in-process ``local`` endpoint).
2. 404 not_found: no operation at that path, or a method other than POST
   (with ``operations=Operations.SPEC``: also every operation api-spec.md
   does not show).
3. 403 forbidden: a viewer key on anything but a read (a Get, a List, a check without
   side effect: GetPolicyCodeValidity, or what an impact report found).
4. 400 invalid_request: CreatePermission's Connect headers; Content-Type
   not ``application/json``; a Content-Encoding other than ``gzip`` or
   ``identity`` (a Connect client may compress its requests); a body over
   1 MiB (as sent, and once decompressed: it is never inflated further), not
   valid gzip where it says so, not UTF-8 JSON, or not an object; then the
   request model (strict, no unknown fields).
5. 404 not_found: an id the request names (``must_exist``) does not exist.
6. The operation; 500 internal_error for anything unexpected (never a
   stack trace in the answer).

``GET /_govsync/health`` (with ``inFlight``: the API calls received and not
answered yet) and ``GET /_govsync/objects`` (every stored object by kind) serve
tests and tooling; they need a full key.

``operations`` picks what is served: ``all`` (api-spec.md's operations and
api-lifecycle.md's reads, updates and deletes) or ``spec`` (the spec's only,
an endpoint without the reads; contract section 12).

``latency_ms`` delays every API answer (the delay comes first, before the
checks); with CreatePermission's ``Connect-Timeout-Ms`` shorter than it, the
answer is 504 deadline_exceeded once that timeout has passed, whatever the
request, and nothing is stored.  ``fault_rate`` makes that
fraction of valid write calls (creates, updates, deletes) fail: half answer 500 before storing anything,
half store the object and then drop the connection without any answer.
Error bodies: see ``errors.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import zlib
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

from govsync.api.catalog import BY_PATH, PATH_PREFIX, Operation, Verb
from govsync.api.kinds import KINDS, SEEDED_KINDS
from govsync.api.models import CONNECT_PROTOCOL_VERSION, CONNECT_TIMEOUT_PATTERN
from govsync.server.errors import ApiFailure, error_response, invalid, json_response, violations
from govsync.server.operations import Engine
from govsync.server.reports import MOMENT_SECONDS
from govsync.server.store import Store

logger = logging.getLogger("govsync.server")

MAX_BODY = 1024 * 1024
HEALTH_PATH = "/_govsync/health"
OBJECTS_PATH = "/_govsync/objects"
# /_govsync/objects: the manifest kinds, then the kinds only a seed creates.
OBJECT_KINDS: tuple[str, ...] = tuple(dict.fromkeys([k.name for k in KINDS] + list(SEEDED_KINDS)))

_TIMEOUT = re.compile(CONNECT_TIMEOUT_PATTERN)
_DIGITS = re.compile(r"^[0-9]{1,19}$")
# A request body's Content-Encoding: none, or gzip (what Connect clients compress with).
IDENTITY, GZIP = "identity", "gzip"
TOO_LARGE = "the request body exceeds 1 MiB"


class Operations(StrEnum):
    """Which operations a server answers (``govsync serve --operations``)."""

    ALL = "all"  # api-spec.md's and api-lifecycle.md's
    SPEC = "spec"  # api-spec.md's only: every other one is 404 not_found

    def offers(self, op: Operation) -> bool:
        return self == Operations.ALL or op.spec


VIEWER_ONLY_READS = "a viewer key may call Get and List operations only"


class _Dropped(Exception):
    """Fault injection stored the object; the answer must never arrive."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class ReferenceServer:
    """The state and request pipeline behind ``create_app``."""

    def __init__(
        self,
        store: Store,
        *,
        api_keys: Sequence[str] | None,
        viewer_keys: Sequence[str] = (),
        latency_ms: int = 0,
        fault_rate: float = 0.0,
        rng: random.Random | None = None,
        operations: Operations = Operations.ALL,
        report_seconds: float = MOMENT_SECONDS,
    ) -> None:
        self.store = store
        self.operations = operations
        self.engine = Engine(store, report_seconds=report_seconds)
        self.api_keys = frozenset(api_keys or ())
        self.viewer_keys = frozenset(viewer_keys) - self.api_keys
        self.latency_ms = latency_ms
        self.fault_rate = fault_rate
        self.rng = rng or random.Random()
        # API calls received (their body not necessarily read) and not answered yet.
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if not path.startswith(PATH_PREFIX):
            await self._serve(scope, receive, send, path)
            return
        self.in_flight += 1
        try:
            await self._serve(scope, receive, send, path)
        finally:
            self.in_flight -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        request = Request(scope, receive)
        op = BY_PATH.get(path)
        connect = op is not None and op.connect
        try:
            response = await self._handle(request, path, op)
        except ApiFailure as failure:
            response = error_response(failure, connect=connect)
        except _Dropped:
            # Imported here: it brings uvicorn, which the in-process server
            # (the `local` endpoint) never needs (15 ms of its start-up).
            from govsync.server.droppable import connection_of

            connection = connection_of(scope)
            if connection is None:
                raise ConnectionResetError("connection dropped by fault injection") from None
            connection.drop()
            return
        except ClientDisconnect:
            return  # the client went away before its body arrived: nothing was stored
        except Exception:
            logger.exception("internal error answering %s %s", scope["method"], path)
            response = error_response(ApiFailure(500, "internal error"), connect=connect)
        await response(scope, receive, send)

    async def _handle(self, request: Request, path: str, op: Operation | None) -> Response:
        if path.startswith(PATH_PREFIX):
            await self._delay(request, op)
        key = request.headers.get("x-api-key")
        if not key or (key not in self.viewer_keys and self.api_keys and key not in self.api_keys):
            raise ApiFailure(401, "missing or unknown API key (header X-API-KEY)")
        viewer = key in self.viewer_keys
        method = request.method

        if path in (HEALTH_PATH, OBJECTS_PATH):
            if method != "GET":
                raise ApiFailure(404, f"no {method} {path}; use GET")
            if viewer:
                raise ApiFailure(403, VIEWER_ONLY_READS)
            if path == HEALTH_PATH:
                return json_response({"status": "ok", "inFlight": self.in_flight})
            return json_response({kind: self.store.list(kind) for kind in OBJECT_KINDS})

        if op is None or not self.operations.offers(op) or method != "POST":
            raise ApiFailure(404, "no such operation (every operation is POST /core.v1.<Service>/<Operation>)")
        if viewer and not op.verb.reads:
            raise ApiFailure(403, VIEWER_ONLY_READS)
        if op.connect:
            self._check_connect_headers(request)
        body = await self._read_json(request)
        try:
            model = op.request.model_validate(body)
        except ValidationError as exc:
            found = violations(exc)
            raise ApiFailure(400, f"invalid request: {len(found)} field(s) rejected", found) from None
        except RecursionError:
            raise invalid("the request body is nested too deeply") from None
        self.engine.check_references(op, body)

        fault = None
        if not op.verb.reads and self.fault_rate > 0 and self.rng.random() < self.fault_rate:
            fault = "error" if self.rng.random() < 0.5 else "drop"
        if fault == "error":
            raise ApiFailure(500, "internal error (injected fault: nothing was stored)")
        if op.verb in (Verb.CHECK, Verb.RESULTS):  # code run in the engines' worker: not
            result = await run_in_threadpool(self.engine.perform, op, model)  # on the loop
        else:
            result = self.engine.perform(op, model)
        if fault == "drop":
            raise _Dropped()
        return json_response(result)

    async def _delay(self, request: Request, op: Operation | None) -> None:
        """The injected latency; a Connect deadline shorter than it is a 504."""
        if not self.latency_ms:
            return
        if op is not None and op.connect:
            timeout = request.headers.get("connect-timeout-ms", "")
            if _TIMEOUT.match(timeout) and int(timeout) < self.latency_ms:
                await asyncio.sleep(int(timeout) / 1000)
                raise ApiFailure(504, "deadline exceeded before the server answered")
        await asyncio.sleep(self.latency_ms / 1000)

    @staticmethod
    def _check_connect_headers(request: Request) -> None:
        version = request.headers.get("connect-protocol-version")
        if version is not None and version != CONNECT_PROTOCOL_VERSION:
            raise invalid("unsupported Connect protocol version", "Connect-Protocol-Version",
                          f"Connect-Protocol-Version must be {CONNECT_PROTOCOL_VERSION}")
        timeout = request.headers.get("connect-timeout-ms")
        if timeout is not None and not _TIMEOUT.match(timeout):
            raise invalid("invalid Connect timeout", "Connect-Timeout-Ms",
                          "Connect-Timeout-Ms must be a positive integer of at most 10 digits "
                          "(no leading zero)")

    @staticmethod
    async def _read_json(request: Request) -> Any:
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            raise invalid("Content-Type must be application/json")
        encoding = request.headers.get("content-encoding", IDENTITY).strip().lower()
        if encoding not in (IDENTITY, GZIP):
            raise invalid("Content-Encoding must be gzip or identity (or absent)")
        length = request.headers.get("content-length")
        if length is not None and (not _DIGITS.match(length) or int(length) > MAX_BODY):
            raise invalid(TOO_LARGE if _DIGITS.match(length) else "invalid Content-Length")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise invalid(TOO_LARGE)
            chunks.append(chunk)
        data = b"".join(chunks)
        if encoding == GZIP:
            data = gunzip(data, MAX_BODY)
        try:
            body = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise invalid("the request body is not valid UTF-8 JSON") from None
        if not isinstance(body, dict):
            raise invalid("the request body must be a JSON object")
        return body


def gunzip(data: bytes, limit: int) -> bytes:
    """A gzip body decompressed (one member or several, as RFC 1952 allows), never to more
    than ``limit`` bytes: a body that would hold more is a 400 once ``limit`` is passed."""
    out = bytearray()
    while True:
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflate.decompress(data, limit + 1 - len(out))
        except zlib.error:
            raise invalid("the request body is not valid gzip") from None
        if len(out) > limit:
            raise invalid(f"{TOO_LARGE} once decompressed")
        if not inflate.eof:
            raise invalid("the request body is not valid gzip (it ends early)")
        data = inflate.unused_data
        if not data:
            return bytes(out)


def create_app(
    store: Store,
    *,
    api_keys: list[str] | None,
    viewer_keys: Sequence[str] = (),
    latency_ms: int = 0,
    fault_rate: float = 0.0,
    rng: random.Random | None = None,
    operations: Operations = Operations.ALL,
    report_seconds: float = MOMENT_SECONDS,
) -> Starlette:
    """The reference server over ``store`` as a Starlette app (``report_seconds``: how long
    an impact report runs at least)."""
    server = ReferenceServer(
        store,
        api_keys=api_keys,
        viewer_keys=viewer_keys,
        latency_ms=latency_ms,
        fault_rate=fault_rate,
        rng=rng,
        operations=operations,
        report_seconds=report_seconds,
    )
    app = Starlette(routes=[Mount("", app=server)])
    app.state.server = server
    return app
