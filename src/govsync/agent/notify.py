"""Notifications: a generic webhook (JSON, HMAC-signed), a Slack incoming webhook,
and GitHub (a commit status on the revision; one issue per environment, opened
on drift and closed when it clears).

What users of Flux's notification-controller and Argo CD's notifications ask
for, and what this does:

* no spam, no duplicates: the agent sends a message once per environment,
  revision and event (``Ledger``), across restarts and replicas, since the
  ledger is kept in the workspace's state; a delivery carries an id
  (``X-Govsync-Delivery``) so that a receiver can drop the rare repeat that a
  replica killed between sending and recording makes;
* no silent failures: every attempt is counted (``govsync_notifications_total``
  by sink and result) and the last error of each sink is in the status;
* never blocking a cycle: each sink has a thread and a queue of its own, and
  retries with exponential backoff there (a failing sink delays only its own
  later messages, which stay in order).

The repository the agent follows is not trusted to say where messages go: a
commit could name any host, or hand a sink govsync's own key.  ``SinkPolicy``
is the operator's word (``--allow-sink-host``, ``--github-api``; ``reach.py``): a
sink whose host it does not allow, or whose credentials are govsync's, is
refused by name when the project is read and again before anything is sent.  A sink's answer
is read within ``MAX_ANSWER`` bytes and ``DEADLINE`` seconds in all (a slow
trickle included), and never shown: the status says its HTTP status or one of
a few fixed reasons.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpcore
import httpx

from govsync import __version__
from govsync.agent.reach import DeadlineBackend, Refused, SinkPolicy, proxy_of
from govsync.agentconfig import Event, Sink, SinkType
from govsync.errors import AgentError
from govsync.formats import FORMAT_VERSION
from govsync.plan import Action
from govsync.state import now
from govsync.values import SecretRef

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Govsync-Signature-256"
# Seconds between the attempts of one delivery; then it is dropped (and counted).
BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 60.0, 60.0, 60.0)
# Each network step (connect, a read, a write) of one attempt, and the attempt in all.
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


class Result:
    """The results counted by ``govsync_notifications_total``."""

    SENT = "sent"
    FAILED = "failed"  # one attempt failed (it is tried again)
    DROPPED = "dropped"  # every attempt failed: given up
    DEDUPLICATED = "deduplicated"  # sent already for this revision and event
    REFUSED = "refused"  # the operator does not allow this sink: never sent


@dataclass(frozen=True)
class Message:
    """What a notification says (a webhook's JSON is ``payload``)."""

    id: str
    event: Event
    environment: str
    workspace: str
    revision: str | None
    status: str
    reason: str
    summary: Mapping[str, int]
    url: str | None
    at: str

    def payload(self) -> dict[str, Any]:
        return {"formatVersion": FORMAT_VERSION, "id": self.id, "event": str(self.event),
                "environment": self.environment, "workspace": self.workspace,
                "revision": self.revision, "status": self.status, "reason": self.reason,
                "summary": dict(self.summary), "url": self.url, "at": self.at}

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> Message:
        return cls(str(data["id"]), Event(data["event"]), str(data["environment"]),
                   str(data["workspace"]), data.get("revision"), str(data["status"]),
                   str(data.get("reason") or ""), dict(data.get("summary") or {}),
                   data.get("url"), str(data.get("at") or ""))

    def text(self) -> str:
        """One line for a person (Slack, GitHub)."""
        at = f" at {self.revision[:12]}" if self.revision else ""
        what = {Event.APPLIED: "applied", Event.FAILED: "apply failed"}.get(
            self.event, self.status)
        link = f" ({self.url})" if self.url else ""
        return f"govsync: {self.environment} {what}{at}: {self.reason}{link}"


def delivery_id(environment: str, sink: str, revision: str | None, event: Event) -> str:
    """The same for every attempt, replica and restart: what a receiver deduplicates on."""
    text = f"{environment}\0{sink}\0{revision or ''}\0{event}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def signature(secret: str, body: bytes) -> str:
    """The value of X-Govsync-Signature-256: ``sha256=`` and the body's HMAC in hex."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Delivery:
    """One message for one sink; ``issue``: the GitHub issue open for the environment."""

    sink: Sink
    message: Message
    issue: int | None = None
    attempts: int = 0


@dataclass
class SinkHealth:
    """What the status shows of a sink."""

    sent: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str = ""
    last_error_at: str = ""
    queued: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "failedAttempts": self.failed, "dropped": self.dropped,
                "queued": self.queued, "lastError": self.last_error or None,
                "lastErrorAt": self.last_error_at or None}


# What the notifier reports of a delivery: (delivery, result, error, facts).
OnResult = Callable[[Delivery, str, str, Mapping[str, Any]], None]


class Notifier:
    """A thread and a queue per (environment, sink); ``send`` never waits."""

    def __init__(self, environ: Mapping[str, str], on_result: OnResult, policy: SinkPolicy, *,
                 backoff: tuple[float, ...] = BACKOFF, deadline: float = DEADLINE) -> None:
        self.environ = environ
        self.on_result = on_result
        self.policy = policy
        self.backoff = backoff
        self.deadline = deadline
        self.health: dict[tuple[str, str], SinkHealth] = {}
        self._queues: dict[tuple[str, str], queue.Queue[Delivery | None]] = {}
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._ssl = httpx.create_ssl_context()

    def send(self, delivery: Delivery) -> None:
        key = (delivery.message.environment, delivery.sink.name)
        with self._lock:
            if key not in self._queues:
                self._queues[key] = queue.Queue()
                self.health[key] = SinkHealth()
                thread = threading.Thread(target=self._work, args=(key,), daemon=True,
                                          name=f"govsync-notify-{key[0]}-{key[1]}")
                self._threads.append(thread)
                thread.start()
            self.health[key].queued += 1
            self._queues[key].put(delivery)

    def pending(self) -> int:
        with self._lock:
            return sum(h.queued for h in self.health.values())

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for what is queued, then stop (what is left
        stays queued in the ledger: the next leader sends it)."""
        for q in list(self._queues.values()):
            q.put(None)
        deadline = threading.Event()
        timer = threading.Timer(timeout, deadline.set)
        timer.start()
        try:
            for thread in self._threads:
                while thread.is_alive() and not deadline.is_set():
                    thread.join(0.1)
        finally:
            timer.cancel()
            self._closing.set()
            for thread in self._threads:
                thread.join(1.0)

    def _work(self, key: tuple[str, str]) -> None:
        q = self._queues[key]
        while not self._closing.is_set():
            delivery = q.get()
            if delivery is None:
                return
            self._deliver(key, delivery)
            with self._lock:
                self.health[key].queued -= 1

    def _deliver(self, key: tuple[str, str], delivery: Delivery) -> None:
        health = self.health[key]
        for pause in (0.0, *self.backoff):
            if pause and self._closing.wait(pause):
                return  # stopping: it stays queued in the ledger
            delivery.attempts += 1
            try:
                facts = self.deliver(delivery)
            except Refused as exc:
                health.dropped += 1
                health.last_error, health.last_error_at = str(exc), now()
                self.on_result(delivery, Result.REFUSED, str(exc), {})
                return
            except (AgentError, OSError) as exc:  # OSError: no file for a socket...
                error = str(exc) if isinstance(exc, AgentError) else (
                    f"{delivery.sink.type} sink {delivery.sink.name}: "
                    f"{exc.strerror or type(exc).__name__}")
                health.failed += 1
                health.last_error, health.last_error_at = error, now()
                log.warning("notification to %s failed (attempt %d): %s", delivery.sink.name,
                            delivery.attempts, error)
                self.on_result(delivery, Result.FAILED, error, {})
                continue
            health.sent += 1
            self.on_result(delivery, Result.SENT, "", facts)
            return
        health.dropped += 1
        self.on_result(delivery, Result.DROPPED, health.last_error, {})

    # -- the sinks ------------------------------------------------------------------
    def deliver(self, delivery: Delivery) -> dict[str, Any]:
        """One attempt; what to remember (GitHub: the issue), or AgentError (Refused:
        the operator does not allow this sink, checked here again before sending)."""
        sink = delivery.sink
        refusal = self.policy.refusal(sink, self.environ)
        if refusal is not None:
            raise Refused(refusal)
        if sink.type == SinkType.GITHUB:
            return self._github(delivery)
        url = self._value(sink.url, "url")
        message = delivery.message
        if sink.type == SinkType.SLACK:
            body = json.dumps({"text": message.text()}).encode()
            headers = {"content-type": "application/json"}
        else:
            body = json.dumps(message.payload(), sort_keys=True).encode()
            headers = {"content-type": "application/json", "x-govsync-event": str(message.event),
                       "x-govsync-delivery": message.id}
            if sink.secret is not None:
                headers[SIGNATURE_HEADER] = signature(self._value(sink.secret, "secret"), body)
        self._request("POST", url, sink, body, headers)
        return {}

    def _value(self, value: str | SecretRef | None, what: str) -> str:
        if isinstance(value, SecretRef):
            found = self.environ.get(value.variable)
            if not found:
                raise AgentError(f"the {what} is not set: environment variable "
                                 f"{value.variable}")
            return found
        if not value:
            raise AgentError(f"no {what}")
        return value

    def _request(self, method: str, url: str, sink: Sink, body: bytes | None,
                 headers: Mapping[str, str]) -> Any:
        """One request, the answer read within MAX_ANSWER bytes and the deadline; the
        answer's JSON (None if it is not JSON).  An AgentError says the status or a
        fixed reason, never what the sink answered or where a URL from a variable
        points."""
        where = f"{sink.type} sink {sink.name}"
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise Refused(f"{where}: its url is not an http:// or https:// URL")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if sink.type != SinkType.GITHUB and not self.policy.allows(parsed.host, port):
            raise Refused(f"{where}: its host is not one this agent may send to")
        sent = {"host": parsed.netloc.decode("ascii"), "user-agent": f"govsync/{__version__}",
                "accept-encoding": "identity", **headers}
        if body is not None:
            sent["content-length"] = str(len(body))
        target = httpcore.URL(scheme=parsed.scheme, host=parsed.host, port=parsed.port,
                              target=parsed.raw_path)
        proxy = proxy_of(parsed.scheme, parsed.host, self.environ)
        steps = {"connect": TIMEOUT, "read": TIMEOUT, "write": TIMEOUT, "pool": TIMEOUT}
        backend = DeadlineBackend(time.monotonic() + self.deadline)
        data = bytearray()
        try:
            with httpcore.ConnectionPool(ssl_context=self._ssl, network_backend=backend,
                                         proxy=proxy, max_connections=1) as pool, \
                    pool.stream(method, target, headers=list(sent.items()), content=body,
                                extensions={"timeout": steps}) as answer:
                status = answer.status
                for chunk in answer.iter_stream():
                    data += chunk
                    if len(data) > MAX_ANSWER:
                        raise AgentError(f"{where}: its answer is larger than "
                                         f"{MAX_ANSWER // 1024} KiB (not read)")
        except httpcore.TimeoutException:
            raise AgentError(f"{where}: no answer within {self.deadline:g} s") from None
        except httpcore.ConnectError:
            raise AgentError(f"{where}: cannot connect") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol):
            raise AgentError(f"{where}: the connection failed") from None
        if status >= 300:
            raise AgentError(f"{where} answered {status}")
        try:
            return json.loads(bytes(data)) if data else None
        except ValueError:
            return None

    def _github(self, delivery: Delivery) -> dict[str, Any]:
        sink, message = delivery.sink, delivery.message
        token = self._value(sink.token, "token")
        headers = {"authorization": f"Bearer {token}", "accept": "application/vnd.github+json",
                   "x-github-api-version": "2022-11-28", "content-type": "application/json"}
        repo = f"{self.policy.github_api}/repos/{sink.repository}"

        def call(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
            return self._request(method, url, sink, None if body is None else json.dumps(
                body).encode(), headers)

        state = GITHUB_STATE.get(message.event)
        if state is not None and message.revision:
            call("POST", f"{repo}/statuses/{message.revision}", {
                "state": state, "context": f"govsync/{message.environment}",
                "description": f"{message.status}: {message.reason}"[:140],
                **({"target_url": message.url} if message.url else {})})
        issue = delivery.issue
        title = f"govsync: {message.environment} has drifted from its manifests"
        if message.event in DRIFT:
            if issue is None:
                issue = self._open_issue(repo, title, call)
            if issue is None:
                made = call("POST", f"{repo}/issues", {
                    "title": title, "labels": [GITHUB_LABEL], "body": _issue_body(message)})
                try:
                    return {"issue": int(made["number"])}
                except (TypeError, KeyError, ValueError):
                    raise AgentError(f"github sink {sink.name}: the issue it made has no "
                                     "number") from None
            call("POST", f"{repo}/issues/{issue}/comments", {"body": _issue_body(message)})
            return {"issue": issue}
        if message.event == Event.SYNCED:
            if issue is None:
                issue = self._open_issue(repo, title, call)
            if issue is not None:
                call("POST", f"{repo}/issues/{issue}/comments", {"body": _issue_body(message)})
                call("PATCH", f"{repo}/issues/{issue}",
                     {"state": "closed", "state_reason": "completed"})
            return {"issue": None}
        return {}

    @staticmethod
    def _open_issue(repo: str, title: str, call: Callable[[str, str], Any]) -> int | None:
        """The environment's open issue, found by its title (a ledger that lost it)."""
        query = urlencode({"state": "open", "labels": GITHUB_LABEL, "per_page": "100"})
        found = call("GET", f"{repo}/issues?{query}")
        try:
            return next((int(i["number"]) for i in found
                         if isinstance(i, dict) and i.get("title") == title), None)
        except (ValueError, TypeError, KeyError):
            return None


def _issue_body(message: Message) -> str:
    counts = ", ".join(f"{n} {a}" for a, n in message.summary.items() if n and a != Action.NOOP)
    return "\n".join([
        f"**{message.environment}** is `{message.status}`"
        + (f" at {message.revision}" if message.revision else "") + ".", "",
        message.reason, "", f"Changes: {counts or 'none'}.",
        *(["", f"Details: {message.url}"] if message.url else [])])


@dataclass
class Ledger:
    """What was sent for one environment, per sink: the revision, each event's
    delivery (queued, sent, failed, dropped), and the GitHub issue that is open.
    Kept in the workspace's state (the agent's value ``notifications``)."""

    sinks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_value(cls, value: Any) -> Ledger:
        return cls(dict(value) if isinstance(value, dict) else {})

    def claim(self, sink: str, revision: str | None, event: Event,
              message: Message) -> bool:
        """Whether ``event`` is news for this sink at this revision (then it is recorded
        as queued, with its message, until it is sent)."""
        entry = self.sinks.get(sink)
        if not isinstance(entry, dict) or entry.get("revision") != revision:
            issue = entry.get("issue") if isinstance(entry, dict) else None
            entry = self.sinks[sink] = {"revision": revision, "events": {}, "issue": issue}
        events = entry.setdefault("events", {})
        if str(event) in events:
            return False
        events[str(event)] = {"state": "queued", "at": now(), "id": message.id,
                              "message": message.payload()}
        return True

    def issue(self, sink: str) -> int | None:
        entry = self.sinks.get(sink)
        found = entry.get("issue") if isinstance(entry, dict) else None
        return found if isinstance(found, int) else None

    def settle(self, delivery: Delivery, result: str, error: str,
               facts: Mapping[str, Any]) -> bool:
        """Record a delivery's result; whether the ledger changed."""
        entry = self.sinks.get(delivery.sink.name)
        if not isinstance(entry, dict):
            return False
        if "issue" in facts:
            entry["issue"] = facts["issue"]
        event = entry.get("events", {}).get(str(delivery.message.event))
        if not isinstance(event, dict) or event.get("id") != delivery.message.id:
            return "issue" in facts
        if result == Result.SENT:
            event.pop("message", None)
            event.update(state="sent", at=now(), attempts=delivery.attempts)
        elif result in (Result.DROPPED, Result.REFUSED):
            event.pop("message", None)
            event.update(state="dropped", at=now(), attempts=delivery.attempts, error=error)
        else:
            event.update(error=error, attempts=delivery.attempts)
        return True

    def queued(self) -> list[tuple[str, Message]]:
        """The deliveries claimed and not yet sent (a replica died, or stopped, before)."""
        out = []
        for sink, entry in self.sinks.items():
            for event in (entry.get("events") or {}).values() if isinstance(entry, dict) else ():
                if isinstance(event, dict) and event.get("state") == "queued" and isinstance(
                        event.get("message"), dict):
                    try:
                        out.append((sink, Message.from_payload(event["message"])))
                    except (KeyError, ValueError):
                        continue
        return out

    def value(self) -> dict[str, Any]:
        copy: dict[str, Any] = json.loads(json.dumps(self.sinks))  # as stored: JSON
        return copy
