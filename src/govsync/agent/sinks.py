"""The notification sinks, one class per type (``SINKS``): a generic webhook (JSON,
HMAC-signed), a Slack incoming webhook, and GitHub (a commit status on the
revision; one issue per environment, opened on drift and closed when it clears).

A sink sends through a transport it is given (an ``httpx.BaseTransport``): the
agent's is ``SinkTransport`` (httpcore's sockets, every step cut short at one
deadline, through the operator's proxy); a test gives ``httpx.MockTransport``.
Whatever the transport, a sink reads at most ``MAX_ANSWER`` bytes of an answer,
and never shows what a sink answered: an ``AgentError`` says the HTTP status or
one of a few fixed reasons.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlencode

import httpcore
import httpx

from govsync import __version__
from govsync.agent.message import Delivery, Message
from govsync.agent.reach import DeadlineBackend, Refused, SinkPolicy, proxy_of
from govsync.agentconfig import Event, Sink, SinkType
from govsync.errors import AgentError
from govsync.plan import Action
from govsync.values import SecretRef

SIGNATURE_HEADER = "X-Govsync-Signature-256"
# Each network step (connect, a read, a write) of one request, and the request in all.
TIMEOUT = 10.0
DEADLINE = 30.0
# The most of a sink's answer that is read (GitHub's list of open issues included).
MAX_ANSWER = 1024 * 1024
GITHUB_LABEL = "govsync"
# GitHub's commit status of each event.
GITHUB_STATE = {
    Event.SYNCED: "success", Event.APPLIED: "success", Event.OUT_OF_SYNC: "pending",
    Event.BLOCKED: "failure", Event.UNCERTAIN: "failure", Event.FAILED: "failure",
    Event.ERROR: "error", Event.DRIFTED: "failure",
}
# The events that mean the environment has drifted from its manifests (an issue).
DRIFT = frozenset({Event.OUT_OF_SYNC, Event.BLOCKED, Event.UNCERTAIN, Event.ERROR,
                   Event.DRIFTED})


def signature(secret: str, body: bytes) -> str:
    """The value of X-Govsync-Signature-256: ``sha256=`` and the body's HMAC in hex."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Facts:
    """What a delivery leaves to remember: the GitHub issue open for the environment
    (``issue_changed``: one was opened, found or closed; ``issue``: its number, None
    once closed)."""

    issue_changed: bool = False
    issue: int | None = None

    @classmethod
    def of_issue(cls, issue: int | None) -> Facts:
        return cls(True, issue)


class _Bounded(httpx.SyncByteStream):
    """An answer's body as read within the deadline, then the connection closed."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


class SinkTransport(httpx.BaseTransport):
    """The agent's transport to its sinks: one connection per request, through the
    proxy the environment names (``proxy_of``), every network step within
    ``TIMEOUT`` and the whole request, its answer's body included (at most
    ``MAX_ANSWER`` and one more byte is read), within ``deadline`` seconds.
    httpcore's errors become httpx's, as httpx's own transport does."""

    def __init__(self, environ: Mapping[str, str], deadline: float = DEADLINE) -> None:
        self.environ = environ
        self.deadline = deadline
        self._ssl = httpx.create_ssl_context()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        target = httpcore.URL(scheme=url.scheme, host=url.host, port=url.port,
                              target=url.raw_path)
        steps = {"connect": TIMEOUT, "read": TIMEOUT, "write": TIMEOUT, "pool": TIMEOUT}
        backend = DeadlineBackend(time.monotonic() + self.deadline)
        chunks: list[bytes] = []
        size = 0
        try:
            with httpcore.ConnectionPool(ssl_context=self._ssl, network_backend=backend,
                                         proxy=proxy_of(url.scheme, url.host, self.environ),
                                         max_connections=1) as pool, \
                    pool.stream(request.method, target, headers=request.headers.raw,
                                content=request.content or None,
                                extensions={"timeout": steps}) as answer:
                status, headers = answer.status, answer.headers
                for chunk in answer.iter_stream():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_ANSWER:
                        break
        except httpcore.TimeoutException as exc:
            raise httpx.TimeoutException(str(exc), request=request) from None
        except httpcore.ConnectError as exc:
            raise httpx.ConnectError(str(exc), request=request) from None
        except (httpcore.NetworkError, httpcore.ProtocolError,
                httpcore.UnsupportedProtocol) as exc:
            raise httpx.NetworkError(str(exc), request=request) from None
        return httpx.Response(status, headers=headers, stream=_Bounded(chunks),
                              request=request)


class SinkClient:
    """One sink of one type: ``deliver`` makes one attempt of a delivery, and returns
    what to remember, or raises AgentError (Refused: never to be tried again)."""

    type: ClassVar[SinkType]

    def __init__(self, sink: Sink, environ: Mapping[str, str], policy: SinkPolicy,
                 transport: httpx.BaseTransport, deadline: float = DEADLINE) -> None:
        self.sink = sink
        self.environ = environ
        self.policy = policy
        self.transport = transport
        self.deadline = deadline
        self.where = f"{sink.type} sink {sink.name}"

    def deliver(self, delivery: Delivery) -> Facts:
        raise NotImplementedError

    def value(self, value: str | SecretRef | None, what: str) -> str:
        """A url, secret or token: as written, or read from its variable."""
        if isinstance(value, SecretRef):
            found = self.environ.get(value.variable)
            if not found:
                raise AgentError(f"the {what} is not set: environment variable "
                                 f"{value.variable}")
            return found
        if not value:
            raise AgentError(f"no {what}")
        return value

    def host_allowed(self, url: httpx.URL, port: int) -> bool:
        return self.policy.allows(url.host, port)

    def request(self, method: str, url: str, body: bytes | None,
                headers: Mapping[str, str]) -> Any:
        """One request, the answer read within MAX_ANSWER bytes; the answer's JSON (None
        if it is not JSON).  An AgentError says the status or a fixed reason, never
        what the sink answered or where a URL from a variable points."""
        where = self.where
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise Refused(f"{where}: its url is not an http:// or https:// URL")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if not self.host_allowed(parsed, port):
            raise Refused(f"{where}: its host is not one this agent may send to")
        sent = httpx.Request(method, parsed, content=body, headers={
            "user-agent": f"govsync/{__version__}", "accept-encoding": "identity",
            **headers})
        data = bytearray()
        try:
            answer = self.transport.handle_request(sent)
            try:
                # The body as it came (no decoding: accept-encoding is identity).
                stream = answer.stream
                for chunk in stream if isinstance(stream, httpx.SyncByteStream) else ():
                    data += chunk
                    if len(data) > MAX_ANSWER:
                        raise AgentError(f"{where}: its answer is larger than "
                                         f"{MAX_ANSWER // 1024} KiB (not read)")
            finally:
                answer.close()
        except httpx.TimeoutException:
            raise AgentError(f"{where}: no answer within {self.deadline:g} s") from None
        except httpx.ConnectError:
            raise AgentError(f"{where}: cannot connect") from None
        except httpx.TransportError:
            raise AgentError(f"{where}: the connection failed") from None
        if answer.status_code >= 300:
            raise AgentError(f"{where} answered {answer.status_code}")
        try:
            return json.loads(bytes(data)) if data else None
        except ValueError:
            return None


class WebhookSink(SinkClient):
    """The message's JSON (``Message.payload``), signed with the sink's secret."""

    type = SinkType.WEBHOOK

    def deliver(self, delivery: Delivery) -> Facts:
        message = delivery.message
        url = self.value(self.sink.url, "url")
        body = json.dumps(message.payload(), sort_keys=True).encode()
        headers = {"content-type": "application/json", "x-govsync-event": str(message.event),
                   "x-govsync-delivery": message.id}
        if self.sink.secret is not None:
            headers[SIGNATURE_HEADER] = signature(self.value(self.sink.secret, "secret"), body)
        self.request("POST", url, body, headers)
        return Facts()


class SlackSink(SinkClient):
    """One line for a person, to a Slack incoming webhook."""

    type = SinkType.SLACK

    def deliver(self, delivery: Delivery) -> Facts:
        body = json.dumps({"text": delivery.message.text()}).encode()
        self.request("POST", self.value(self.sink.url, "url"), body,
                     {"content-type": "application/json"})
        return Facts()


class GitHubSink(SinkClient):
    """A commit status on the revision, and the environment's issue: opened (or
    commented on) while it drifts, closed when it is Synced again.  The API is the
    operator's (``--github-api``), so no host list applies."""

    type = SinkType.GITHUB

    def host_allowed(self, url: httpx.URL, port: int) -> bool:
        return True

    def call(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        token = self.value(self.sink.token, "token")
        headers = {"authorization": f"Bearer {token}", "accept": "application/vnd.github+json",
                   "x-github-api-version": "2022-11-28", "content-type": "application/json"}
        return self.request(method, url, None if body is None else json.dumps(body).encode(),
                            headers)

    def deliver(self, delivery: Delivery) -> Facts:
        message = delivery.message
        self.value(self.sink.token, "token")  # said before anything is sent
        repo = f"{self.policy.github_api}/repos/{self.sink.repository}"
        state = GITHUB_STATE.get(message.event)
        if state is not None and message.revision:
            self.call("POST", f"{repo}/statuses/{message.revision}", {
                "state": state, "context": f"govsync/{message.environment}",
                "description": f"{message.status}: {message.reason}"[:140],
                **({"target_url": message.url} if message.url else {})})
        issue = delivery.issue
        title = f"govsync: {message.environment} has drifted from its manifests"
        if message.event in DRIFT:
            if issue is None:
                issue = self.open_issue(repo, title)
            if issue is None:
                made = self.call("POST", f"{repo}/issues", {
                    "title": title, "labels": [GITHUB_LABEL], "body": issue_body(message)})
                try:
                    return Facts.of_issue(int(made["number"]))
                except (TypeError, KeyError, ValueError):
                    raise AgentError(f"github sink {self.sink.name}: the issue it made has no "
                                     "number") from None
            self.call("POST", f"{repo}/issues/{issue}/comments", {"body": issue_body(message)})
            return Facts.of_issue(issue)
        if message.event == Event.SYNCED:
            if issue is None:
                issue = self.open_issue(repo, title)
            if issue is not None:
                self.call("POST", f"{repo}/issues/{issue}/comments",
                          {"body": issue_body(message)})
                self.call("PATCH", f"{repo}/issues/{issue}",
                          {"state": "closed", "state_reason": "completed"})
            return Facts.of_issue(None)
        return Facts()

    def open_issue(self, repo: str, title: str) -> int | None:
        """The environment's open issue, found by its title (a ledger that lost it)."""
        query = urlencode({"state": "open", "labels": GITHUB_LABEL, "per_page": "100"})
        found = self.call("GET", f"{repo}/issues?{query}")
        try:
            return next((int(i["number"]) for i in found
                         if isinstance(i, dict) and i.get("title") == title), None)
        except (ValueError, TypeError, KeyError):
            return None


def issue_body(message: Message) -> str:
    counts = ", ".join(f"{n} {a}" for a, n in message.summary.items() if n and a != Action.NOOP)
    return "\n".join([
        f"**{message.environment}** is `{message.status}`"
        + (f" at {message.revision}" if message.revision else "") + ".", "",
        message.reason, "", f"Changes: {counts or 'none'}.",
        *(["", f"Details: {message.url}"] if message.url else [])])


# The class of each sink type.
SINKS: dict[SinkType, type[SinkClient]] = {
    s.type: s for s in (WebhookSink, SlackSink, GitHubSink)}
