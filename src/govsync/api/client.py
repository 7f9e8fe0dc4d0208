"""The client of the control API, generated from the operation catalog.

    AsyncClient(base_url, api_key, transport=..., retry=...)
    RetryPolicy(max_retries, backoff, ...)   how failed calls are tried again
    check_endpoint(endpoint, key)            what ``runtime.connect`` connects with

The client calls any catalog operation by name (``call("CreateSpace", body)``)
and reads every group (``list_all_groups()``).  It holds the endpoint's base URL,
the key (an ``httpx.Auth`` whose repr hides it), the one httpx transport every
request travels by (``transport.open_transport`` chooses it: in-process, httpx's
pool, or lanes) and the retry policy; each request is sent one way, straight to
that transport, and each answer read one way, at most ``MAX_ANSWER_BYTES`` of it.
Request building, error mapping and the retry policy live in ``_Core``,
which does no I/O: each call is a generator that yields what it needs done
(send this request, sleep this long) and receives the outcome; the client
drives it with its transport and the policy's sleep.

Retry policy (``max_retries`` extra attempts, full-jitter exponential
backoff, ``Retry-After`` honoured up to ``MAX_RETRY_AFTER`` seconds):

- not sent (connect error or timeout, pool timeout): retried; TransportError.
- 429, 500, 503: retried; the server says nothing was done.
- 502, 504 (a gateway's answer: the server may have acted): retried only for
  ``retry_safe`` operations, otherwise AmbiguousError at once.
- sent, no answer (read timeout, dropped connection, an in-process app that
  raises OSError): retried only for ``retry_safe`` operations, otherwise
  AmbiguousError at once: a create is never sent twice.
- any other status: the ApiStatusError subclass of errors.py, not retried.

The key, the request's secret values and the secrets the client was given
(``hidden``: what govsync knows, ``runtime.client``) are scrubbed from every
message and from every answer (``values.scrub``): a server, or a proxy, that
echoes one of them in what it returns has it shown, written and recorded as
``(sensitive)``, reads and writes alike.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar, Union

import httpx

from govsync import __version__, errors, paths, redact
from govsync.api.catalog import Operation
from govsync.api.catalog import operation as operation_row
from govsync.api.kinds import identifying_fields
from govsync.api.status import SPEC_CODES as _CODES
from govsync.api.status import DetailType
from govsync.api.transport import Lanes, key_auth, open_transport, shown_url
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.envvars import ENDPOINT as ENDPOINT_ENV
from govsync.values import SENSITIVE, scrub, sought

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["AsyncClient", "RetryEvent", "RetryPolicy", "check_endpoint"]

log = logging.getLogger(__name__)
# A library's loggers say nothing unless asked (GOVSYNC_LOG): without a handler of
# their own, Python's last-resort handler would print warnings as bare lines.
logging.getLogger("govsync").addHandler(logging.NullHandler())

Body = Union[Mapping[str, Any], "BaseModel"]
T = TypeVar("T")
# What a call asks its driver to do: send a request, or sleep some seconds.
Effect = httpx.Request | float
# What the driver sends back: the response, the exception sending raised, or None.
Answer = httpx.Response | Exception | None
Steps = Generator[Effect, Answer, T]

MAX_RETRY_AFTER = 60.0
# The largest answer read (a List page of 500 objects is far below it): what a server
# sends beyond it is not read into memory (contract 7: any answer, a one-line error).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
LOCAL_BASE_URL = "http://localhost"
LOCAL_API_KEY = "local"

_NOT_SENT_RETRY = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_NOT_SENT_FINAL = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)
_CLEAN_RETRY_STATUSES = frozenset({429, 500, 503})
_GATEWAY_STATUSES = frozenset({502, 504})
# The answers that refuse the key (unknown, or not allowed the operation).
_KEY_STATUSES = frozenset({errors.UnauthorizedError.status, errors.ForbiddenError.status})


@dataclass(frozen=True)
class RetryEvent:
    """Passed to ``on_retry`` before the client sleeps and tries again."""

    operation: str
    attempt: int  # the attempt that failed, from 1
    status: int | None  # the HTTP status, None when no answer came
    delay: float  # seconds until the next attempt
    reason: str  # "503", "ConnectError", ...


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` more attempts at most, each after a full-jitter exponential
    backoff (``backoff`` seconds doubled each time, at most ``max_backoff``, drawn
    from ``rng``) or the server's ``Retry-After``; ``on_retry`` hears of each before
    the wait; ``sleep`` waits (anyio's by default)."""

    max_retries: int = 4
    backoff: float = 0.25
    max_backoff: float = 8.0
    on_retry: Callable[[RetryEvent], None] | None = None
    rng: random.Random | None = None
    sleep: Callable[[float], Awaitable[object] | object] | None = None


def _log_reason(error: errors.ApiError) -> str:
    """How a failed call is logged: its status and code, or the kind of failure; never
    its message (which quotes the server's words)."""
    if isinstance(error, errors.ApiStatusError):
        return f"{error.status} {error.code}".strip()
    return type(error).__name__


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _payload(body: Body | None) -> dict[str, Any]:
    if body is None:
        return {}
    if isinstance(body, Mapping):
        return dict(body)
    return body.model_dump(mode="json", exclude_none=True)


def _secret_values(op: Operation, payload: Mapping[str, Any]) -> list[str]:
    found = []
    for path in op.secret_paths:
        value = paths.get(payload, paths.split(path))
        if isinstance(value, str) and value:
            found.append(value)
    return found


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _Core:
    """Request building, answer and error mapping, retry policy: no I/O."""

    def __init__(self, *, base_url: str, api_key: str | None, build: Callable[..., httpx.Request],
                 timeout: float, retry: RetryPolicy, key_variable: str = API_KEY_ENV,
                 environment: str | None = None, hidden: Sequence[str] = ()) -> None:
        self.shown_url = base_url
        self._key = api_key
        self._hidden = frozenset(s for s in (*hidden, api_key or "") if s)
        # What an answer is scrubbed of (values.sought), not the embedded server's dummy key.
        self._unsaid = frozenset(sought(self._hidden)) - {LOCAL_API_KEY}
        self.key_variable = key_variable
        self._environment = environment
        self._build = build
        self._timeout = timeout
        self._max_retries = max(0, retry.max_retries)
        self._backoff = retry.backoff
        self._max_backoff = retry.max_backoff
        self._on_retry = retry.on_retry
        self._rng = retry.rng or random.Random()

    def call(self, operation: str | Operation, body: Body | None,
             headers: Mapping[str, str] | None, secrets: Sequence[str] = ()
             ) -> Steps[dict[str, Any]]:
        op = operation_row(operation)
        payload = _payload(body)
        hidden, unsaid = self._secrets([*_secret_values(op, payload), *secrets])
        scrub = _scrubber(hidden)
        extra = {"Connect-Protocol-Version": "1",
                 "Connect-Timeout-Ms": str(int(self._timeout * 1000))} if op.connect else {}
        request = self._build("POST", op.path, json=payload, headers={**extra, **(headers or {})})
        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            # Operation, status, seconds and attempt only: never a body (logs.py).
            log.debug("%s: sending POST %s (%d bytes, attempt %d of %d)",
                      op.name, op.path, len(request.content), attempt, attempts)
            began = time.monotonic()
            outcome = yield request
            seconds = time.monotonic() - began
            cause: Exception | None = None
            if isinstance(outcome, httpx.Response):
                log.info("%s: %d in %.3fs (attempt %d of %d)",
                         op.name, outcome.status_code, seconds, attempt, attempts)
                if outcome.status_code == 200:
                    return _scrubbed(self._parse(op, outcome), outcome.content, unsaid)
                error, retry = self._status_error(op, outcome, scrub, attempt)
                status: int | None = outcome.status_code
                reason = str(status)
                delay = _retry_after(outcome)
            else:
                assert isinstance(outcome, Exception)
                cause, status, reason, delay = outcome, None, type(outcome).__name__, None
                log.info("%s: no answer (%s) after %.3fs (attempt %d of %d)",
                         op.name, reason, seconds, attempt, attempts)
                error, retry = self._transport_error(op, outcome, scrub, attempt)
            if not retry or attempt == attempts:
                log.warning("%s failed: %s", op.name, _log_reason(error))
                raise error from cause
            if delay is None:
                delay = self._rng.uniform(0, min(self._max_backoff, self._backoff * 2 ** (attempt - 1)))
            log.info("%s: %s; retrying in %.2fs (attempt %d of %d)",
                     op.name, reason, delay, attempt + 1, attempts)
            if self._on_retry is not None:
                self._on_retry(RetryEvent(op.name, attempt, status, delay, reason))
            yield delay
        raise AssertionError("unreachable")

    def all_groups(self, query: Body | None, page_size: int) -> Steps[list[dict[str, Any]]]:
        body = {"limit": page_size, **_payload(query)}
        groups: list[dict[str, Any]] = []
        seen: set[str] = set()
        while True:
            page = yield from self.call("ListGroups", body, None)
            groups.extend(page.get("groups") or [])
            cursor = (page.get("listMetadata") or {}).get("nextCursor") or ""
            if not cursor:
                return groups
            if cursor in seen:
                raise errors.ApiError("the server repeated a page cursor; paging stopped",
                                      operation="ListGroups")
            seen.add(cursor)
            body = {**body, "cursor": cursor}

    def _secrets(self, secrets: list[str]) -> tuple[list[str], list[str]]:
        """A call's secrets: its own, the key and the client's, longest first; those
        kept out of its messages, and those kept out of its answer."""
        mine = [s for s in secrets if s]
        said = sorted(self._hidden.union(mine), key=len, reverse=True)
        unsaid = sought(self._unsaid.union(mine))
        return said, unsaid

    @staticmethod
    def _parse(op: Operation, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            # The server did act; only the answer is lost.
            raise errors.AmbiguousError("the server answered 200 without a JSON object; "
                                        "the outcome is unknown", operation=op.name)
        return data

    def _status_error(self, op: Operation, response: httpx.Response,
                      scrub: Callable[[str], str], attempt: int) -> tuple[errors.ApiError, bool]:
        status = response.status_code
        if status in _GATEWAY_STATUSES and not op.retry_safe:
            return errors.AmbiguousError(
                f"answered {status} {response.reason_phrase} (a gateway or deadline): the "
                "request may have been carried out; the outcome is unknown",
                operation=op.name), False
        code, message, details = _error_fields(response, scrub)
        if attempt > 1:
            message += f" (after {attempt} attempts)"
        cls = errors.error_for_status(status)
        if status in _KEY_STATUSES:
            # Which key, and where: one process may hold several (an environment each).
            whose = f"environment {self._environment}: " if self._environment else ""
            message += (f" ({whose}{self.shown_url} refused the key read from "
                        f"{self.key_variable}: check that variable)")
        error = cls(message, operation=op.name, status=status, code=code, details=details)
        return error, status in _CLEAN_RETRY_STATUSES or status in _GATEWAY_STATUSES

    def _transport_error(self, op: Operation, exc: Exception, scrub: Callable[[str], str],
                         attempt: int) -> tuple[errors.ApiError, bool]:
        if isinstance(exc, AnswerTooLarge):
            what = (f"{exc} (at most {MAX_ANSWER_BYTES // (1024 * 1024)} MiB is read); "
                    "stopped reading it")
            if op.verb.reads:
                return errors.ApiError(f"{op.name}: {what}", operation=op.name), False
            return errors.AmbiguousError(f"{what}: the outcome is unknown",
                                         operation=op.name), False
        what = scrub(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        if isinstance(exc, _NOT_SENT_RETRY + _NOT_SENT_FINAL):
            tries = f" after {attempt} attempts" if attempt > 1 else ""
            return errors.TransportError(f"could not reach {self.shown_url}{tries} ({what})",
                                         operation=op.name), isinstance(exc, _NOT_SENT_RETRY)
        return errors.AmbiguousError(
            f"the request was sent but no answer came (attempt {attempt}: {what}); "
            "the outcome is unknown", operation=op.name), op.retry_safe


def _scrubber(hidden: list[str]) -> Callable[[str], str]:
    """A message without any of ``hidden`` (longest first)."""
    def scrub(text: str) -> str:
        for secret in hidden:
            text = text.replace(secret, SENSITIVE)
        return text
    return scrub


def _scrubbed(data: dict[str, Any], body: bytes, hidden: list[str]) -> dict[str, Any]:
    """An answer (``data``, parsed from ``body``) without any of ``hidden`` (longest
    first), walked only where one is found: in the body itself where every character
    of a secret is written as itself (no ``\\u`` or ``\\/`` escape in the body, no
    character JSON escapes in the secret), else in the answer written as JSON again."""
    if not hidden:
        return data
    if (b"\\u" not in body and b"\\/" not in body
            and all(s.isprintable() and '"' not in s and "\\" not in s for s in hidden)):
        if not any(s.encode() in body for s in hidden):
            return data
    else:
        import json  # loaded by httpx already

        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if not any(json.dumps(s, ensure_ascii=False)[1:-1] in text for s in hidden):
            return data
    found: dict[str, Any] = scrub(data, hidden, identifying_fields())
    return found


def _error_fields(response: httpx.Response, scrub: Callable[[str], str]) -> tuple[str, str, Any]:
    """(code, message, details) from either error shape, or from the status alone."""
    status = response.status_code
    code = _CODES.get(status) or _snake(response.reason_phrase.replace(" ", "")) or str(status)
    message = response.reason_phrase or f"HTTP {status}"
    try:
        data = response.json()
    except ValueError:
        return code, message, None
    if not isinstance(data, dict):
        return code, message, None
    if isinstance(data.get("message"), str) and data["message"]:
        message = scrub(data["message"])
    details = data.get("details")
    if isinstance(data.get("code"), str) and data["code"]:
        code = data["code"]
    elif isinstance(details, list):  # CreatePermission's Connect shape
        items = [d for d in details if isinstance(d, Mapping)]
        for item in items:
            if item.get("type") == DetailType.ERROR_CODE and isinstance(item.get("value"), str):
                code = item["value"]
        violations = [
            {"field": str(d.get("value", "")),
             "description": str((d.get("debug") or {}).get("description", ""))}
            for d in items if d.get("type") == DetailType.FIELD_VIOLATION]
        details = {"fieldViolations": violations} if violations else None
    if isinstance(details, dict):
        for violation in details.get("fieldViolations") or []:
            if isinstance(violation, dict) and isinstance(violation.get("description"), str):
                violation["description"] = scrub(violation["description"])
    return code, message, details


def _poster(base_url: str, timeout: float) -> Callable[..., httpx.Request]:
    """The requests the client sends: each operation's URL under the base URL (merged
    once an operation, as httpx's client merges a base URL: its path with one
    trailing slash, then the operation's path), the client's headers (httpx's own
    defaults, JSON accepted, govsync named) and its timeouts.  No cookies: the API is
    authenticated by its key, and a server's cookie (a load balancer's stickiness) is
    never sent back."""
    base = httpx.URL(base_url)
    if not base.raw_path.endswith(b"/"):
        base = base.copy_with(raw_path=base.raw_path + b"/")
    urls: dict[str, httpx.URL] = {}
    common = httpx.Headers({
        "Accept": "application/json", "Accept-Encoding": "gzip, deflate",
        "Connection": "keep-alive", "User-Agent": f"govsync/{__version__}"})
    timeouts = httpx.Timeout(timeout).as_dict()

    def build(method: str, path: str, *, json: Any, headers: Mapping[str, str]) -> httpx.Request:
        url = urls.get(path)
        if url is None:
            url = urls[path] = base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode())
        merged = common.copy()
        merged.update(headers)
        return httpx.Request(method, url, json=json, headers=merged,
                             extensions={"timeout": timeouts})

    return build


class AsyncClient:
    """The API client of one endpoint: ``await client.call("ListGroups", {...})``.

    It holds four things: the endpoint's ``base_url``; the key (``api_key``, sent as
    X-API-KEY by an ``httpx.Auth`` that never shows it; None: no key is sent); the
    ``transport`` every request travels by (``transport.open_transport(base_url)``
    when none is given: the plain-http guard, TLS, the environment's proxy, httpx's
    pool); and the ``retry`` policy.  Beside them, ``timeout`` (seconds, for
    connecting, writing, reading and a pool slot, and said to a Connect endpoint),
    and what its messages and answers need: ``key_variable``, where the key was read
    from, and ``environment``, the project's environment it is for (both named by an
    authentication error); ``hidden``, secrets kept out of every answer and message
    beside the key.

    Every request is built once a call, gets the key, goes to the transport's
    ``handle_async_request`` and has its answer read within ``MAX_ANSWER_BYTES``, on
    every transport alike; ``warm`` opens a pooled transport's connections ahead of
    the calls that will take them."""

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 transport: httpx.AsyncBaseTransport | None = None,
                 retry: RetryPolicy = RetryPolicy(), timeout: float = 30.0,
                 key_variable: str = API_KEY_ENV, environment: str | None = None,
                 hidden: Sequence[str] = ()) -> None:
        self._shown_url, _ = shown_url(base_url)
        if api_key is not None and (not api_key or not api_key.isprintable()
                                    or not api_key.isascii()):
            raise errors.ConfigError("the API key is empty or has characters an HTTP header "
                                     f"cannot carry (check {key_variable})")
        self._transport = transport if transport is not None else open_transport(base_url)
        self._url = httpx.URL(base_url)
        self._timeout = timeout
        self._auth = key_auth(api_key)
        self._sleep = retry.sleep
        # The key lives in the core (and the auth), never in this object's attributes.
        self._core = _Core(base_url=self._shown_url, api_key=api_key, timeout=timeout,
                           build=_poster(base_url, timeout), retry=retry,
                           key_variable=key_variable, environment=environment,
                           hidden=hidden)

    @property
    def base_url(self) -> str:
        return self._shown_url

    @property
    def key_variable(self) -> str:
        """Where the key was read from (a variable's name, never the key)."""
        return self._core.key_variable

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._shown_url!r})"

    async def call(self, operation: str | Operation, body: Body | None = None, *,
                   headers: Mapping[str, str] | None = None,
                   secrets: Sequence[str] = ()) -> dict[str, Any]:
        """Send one operation; the answer's whole JSON body.  ``secrets``: values the
        body carries beyond the operation's secret fields, kept out of every error."""
        return await self._drive(self._core.call(operation, body, headers, secrets))

    async def list_all_groups(self, query: Body | None = None, *, page_size: int = 100
                              ) -> list[dict[str, Any]]:
        """Every group, following ``listMetadata.nextCursor`` page by page."""
        return await self._drive(self._core.all_groups(query, page_size))

    async def warm(self, connections: int) -> None:
        """Open up to ``connections`` more connections now, for the calls that will
        follow, where the transport is a pool that can (``transport.Lanes.warm``: a
        refresh's stream lanes); nothing is sent on them."""
        if isinstance(self._transport, Lanes):
            await self._transport.warm(self._url, connections, self._timeout)

    async def _drive(self, steps: Steps[T]) -> T:
        outcome: Answer = None
        try:
            while True:
                effect = steps.send(outcome)
                if isinstance(effect, httpx.Request):
                    try:
                        outcome = await self._send(effect)
                    except (httpx.HTTPError, OSError, AnswerTooLarge) as exc:
                        outcome = exc
                else:
                    await self._pause(effect)
                    outcome = None
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """One request, the one way: the key added, the transport's answer read whole
        (at most ``MAX_ANSWER_BYTES``) and closed.  No redirect is followed (the API
        answers its POSTs itself) and no cookie kept."""
        if self._auth is not None:
            flow = self._auth.auth_flow(request)
            request = next(flow)
            flow.close()
        response = await self._transport.handle_async_request(request)
        response.request = request
        try:
            await _read_capped(response)
        finally:
            await response.aclose()
        return response

    async def _pause(self, seconds: float) -> None:
        if self._sleep is None:
            import anyio
            await anyio.sleep(seconds)
            return
        result = self._sleep(seconds)
        if isinstance(result, Awaitable):
            await result

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AnswerTooLarge(Exception):
    """An answer longer than ``MAX_ANSWER_BYTES``: not read further."""


async def _read_capped(response: httpx.Response) -> None:
    """Read ``response``'s body into it, at most ``MAX_ANSWER_BYTES`` of it."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise AnswerTooLarge(f"the answer is {int(declared):,} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise AnswerTooLarge(f"the answer is over {MAX_ANSWER_BYTES:,} bytes")
        chunks.append(chunk)
    response._content = b"".join(chunks)


# --- from --endpoint to what to connect with ---------------------------------


def check_endpoint(endpoint: str | None, api_key: str | None, key_source: str = API_KEY_ENV
                   ) -> tuple[str, str | None]:
    """(endpoint, key) to connect with; ConfigError when either is missing (``key_source``:
    the variable the key is read from, and its environment)."""
    endpoint = (endpoint or "").strip()
    if not endpoint:
        raise errors.ConfigError("no API endpoint configured: pass --endpoint URL or set "
                                 f"{ENDPOINT_ENV} (`local` for the embedded reference server)")
    if endpoint == "local":
        return endpoint, api_key or LOCAL_API_KEY
    if not api_key:
        raise errors.ConfigError(f"no API key for {redact.url(endpoint)}: set {key_source}")
    return endpoint, api_key
