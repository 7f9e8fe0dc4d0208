"""The notification sinks, the notifier and the ledger, in-process: each sink sends
through an ``httpx.MockTransport`` that plays the receiver (one end-to-end test per
path stays in tests/agent, through a real receiver)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from typing import Any

import httpx
import pytest

from govsync.agent.ledger import DeliveryState, Ledger
from govsync.agent.message import Delivery, Message, Result
from govsync.agent.notify import Notifier
from govsync.agent.reach import Refused, SinkPolicy
from govsync.agent.sinks import MAX_ANSWER, SINKS, Facts, GitHubSink, SlackSink, WebhookSink
from govsync.agentconfig import DEFAULT_EVENTS, Event, Sink, SinkType
from govsync.errors import AgentError
from govsync.values import SecretRef

POLICY = SinkPolicy.of(["hooks.example.com"], "https://api.github.example", {})
HOOK = Sink(SinkType.WEBHOOK, "ops", DEFAULT_EVENTS, "https://hooks.example.com/h",
            SecretRef("HOOK_SECRET"))
SLACK = Sink(SinkType.SLACK, "chat", DEFAULT_EVENTS, SecretRef("SLACK_URL"))
GITHUB = Sink(SinkType.GITHUB, "gh", DEFAULT_EVENTS | {Event.SYNCED}, repository="acme/gov",
              token=SecretRef("GH_TOKEN"))
ENVIRON = {"HOOK_SECRET": "s3cret", "SLACK_URL": "https://hooks.example.com/slack",
           "GH_TOKEN": "gh-token"}
REPO = "https://api.github.example/repos/acme/gov"


def message(event: Event = Event.OUT_OF_SYNC, status: str = "OutOfSync",
            revision: str | None = "a" * 40) -> Message:
    return Message(f"id-{event}", event, "prod", "prod", revision, status,
                   "changes pending: 1 create", {"create": 1}, "https://agent.example/prod",
                   "2026-01-01T00:00:00Z")


class Receiver:
    """A MockTransport's handler that keeps each request and answers from a script."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.pop(0) if self.answers else httpx.Response(204)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, str(r.url)) for r in self.requests]


def test_every_sink_type_a_project_may_name_has_a_class() -> None:
    # A type added to agentconfig without a class would fail at delivery, not here.
    assert set(SINKS) == set(SinkType)
    assert all(issubclass(SINKS[t], (WebhookSink, SlackSink, GitHubSink)) for t in SinkType)


def test_a_webhook_gets_the_payload_signed_with_its_secret() -> None:
    got = Receiver()
    facts = WebhookSink(HOOK, ENVIRON, POLICY, got.transport).deliver(
        Delivery(HOOK, message()))
    assert facts == Facts()
    [request] = got.requests
    assert (request.method, str(request.url)) == ("POST", "https://hooks.example.com/h")
    assert json.loads(request.content) == message().payload()
    assert request.headers["x-govsync-event"] == "outOfSync"
    assert request.headers["x-govsync-delivery"] == "id-outOfSync"
    assert request.headers["user-agent"].startswith("govsync/")
    expected = hmac.new(b"s3cret", request.content, hashlib.sha256).hexdigest()
    assert request.headers["x-govsync-signature-256"] == f"sha256={expected}"


def test_slack_gets_one_line_for_a_person() -> None:
    got = Receiver()
    SlackSink(SLACK, ENVIRON, POLICY, got.transport).deliver(Delivery(SLACK, message()))
    [request] = got.requests
    assert str(request.url) == "https://hooks.example.com/slack"
    assert json.loads(request.content) == {"text": (
        "govsync: prod OutOfSync at aaaaaaaaaaaa: changes pending: 1 create "
        "(https://agent.example/prod)")}


def test_github_opens_an_issue_on_drift_comments_while_it_lasts_and_closes_it() -> None:
    opened = Receiver(httpx.Response(201), httpx.Response(200, json=[]),
                      httpx.Response(201, json={"number": 7}))
    sink = GitHubSink(GITHUB, ENVIRON, POLICY, opened.transport)
    assert sink.deliver(Delivery(GITHUB, message())) == Facts.of_issue(7)
    assert opened.calls() == [
        ("POST", f"{REPO}/statuses/{'a' * 40}"),
        ("GET", f"{REPO}/issues?state=open&labels=govsync&per_page=100"),
        ("POST", f"{REPO}/issues")]
    assert opened.requests[0].headers["authorization"] == "Bearer gh-token"
    assert json.loads(opened.requests[0].content)["state"] == "pending"
    assert json.loads(opened.requests[2].content)["title"] == (
        "govsync: prod has drifted from its manifests")

    again = Receiver()
    sink = GitHubSink(GITHUB, ENVIRON, POLICY, again.transport)
    assert sink.deliver(Delivery(GITHUB, message(), issue=7)) == Facts.of_issue(7)
    assert again.calls()[1:] == [("POST", f"{REPO}/issues/7/comments")]

    closed = Receiver()
    sink = GitHubSink(GITHUB, ENVIRON, POLICY, closed.transport)
    synced = message(Event.SYNCED, "Synced")
    assert sink.deliver(Delivery(GITHUB, synced, issue=7)) == Facts.of_issue(None)
    assert closed.calls()[1:] == [("POST", f"{REPO}/issues/7/comments"),
                                  ("PATCH", f"{REPO}/issues/7")]
    assert json.loads(closed.requests[0].content)["state"] == "success"
    assert json.loads(closed.requests[2].content) == {"state": "closed",
                                                       "state_reason": "completed"}


@pytest.mark.parametrize(("answer", "said"), [
    (httpx.Response(500, text="internal-canary"), "webhook sink ops answered 500"),
    (httpx.Response(200, content=b"x" * (MAX_ANSWER + 1)),
     "webhook sink ops: its answer is larger than 1024 KiB (not read)")])
def test_an_answer_is_never_shown_and_read_within_a_size(answer: httpx.Response,
                                                          said: str) -> None:
    sink = WebhookSink(HOOK, ENVIRON, POLICY, Receiver(answer).transport)
    with pytest.raises(AgentError) as caught:
        sink.deliver(Delivery(HOOK, message()))
    assert str(caught.value) == said


@pytest.mark.parametrize(("error", "said"), [
    (httpx.ConnectError("refused"), "webhook sink ops: cannot connect"),
    (httpx.ReadTimeout("slow"), "webhook sink ops: no answer within 30 s"),
    (httpx.RemoteProtocolError("garbage"), "webhook sink ops: the connection failed")])
def test_a_transports_error_is_said_in_a_fixed_reason(error: Exception, said: str) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error

    sink = WebhookSink(HOOK, ENVIRON, POLICY, httpx.MockTransport(fail))
    with pytest.raises(AgentError) as caught:
        sink.deliver(Delivery(HOOK, message()))
    assert str(caught.value) == said


def test_a_host_the_operator_did_not_allow_is_refused_before_anything_is_sent() -> None:
    got = Receiver()
    elsewhere = Sink(SinkType.WEBHOOK, "ops", DEFAULT_EVENTS, "https://evil.example/h")
    with pytest.raises(Refused, match="its host is not one this agent may send to"):
        WebhookSink(elsewhere, ENVIRON, POLICY, got.transport).deliver(
            Delivery(elsewhere, message()))
    with pytest.raises(AgentError, match="the secret is not set: environment variable "
                                         "HOOK_SECRET"):
        WebhookSink(HOOK, {}, POLICY, got.transport).deliver(Delivery(HOOK, message()))
    assert got.requests == []


def test_the_notifier_tries_again_and_reports_each_attempt() -> None:
    got = Receiver(httpx.Response(503))
    results: list[tuple[Result, str, Facts]] = []
    done = threading.Event()

    def settled(delivery: Delivery, result: Result, error: str, facts: Facts) -> None:
        results.append((result, error, facts))
        if result != Result.FAILED:
            done.set()

    notifier = Notifier(ENVIRON, settled, POLICY, backoff=(0.01,), transport=got.transport)
    notifier.send(Delivery(HOOK, message()))
    assert done.wait(5.0)
    notifier.close(1.0)
    assert results == [(Result.FAILED, "webhook sink ops answered 503", Facts()),
                       (Result.SENT, "", Facts())]
    assert len(got.requests) == 2
    health = notifier.health[("prod", "ops")].as_dict()
    assert health == {"sent": 1, "failedAttempts": 1, "dropped": 0, "queued": 0,
                      "lastError": "webhook sink ops answered 503",
                      "lastErrorAt": health["lastErrorAt"]}


def test_the_ledger_claims_once_and_keeps_what_became_of_each_delivery(
        caplog: pytest.LogCaptureFixture) -> None:
    ledger = Ledger()
    first = message()
    assert ledger.claim("gh", first.revision, first.event, first)
    assert not ledger.claim("gh", first.revision, first.event, first)  # news once
    assert ledger.queued() == [("gh", first)]
    delivery = Delivery(GITHUB, first, attempts=2)
    assert ledger.settle(delivery, Result.FAILED, "github sink gh answered 502", Facts())
    assert ledger.settle(delivery, Result.SENT, "", Facts.of_issue(7))
    stored: dict[str, Any] = json.loads(json.dumps(ledger.value()))
    event = stored["gh"]["events"]["outOfSync"]
    assert stored["gh"]["revision"] == "a" * 40 and stored["gh"]["issue"] == 7
    assert {k: event[k] for k in ("state", "id", "attempts", "error")} == {
        "state": "sent", "id": "id-outOfSync", "attempts": 2,
        "error": "github sink gh answered 502"}
    assert "message" not in event and ledger.queued() == []
    # Read back as stored; a new revision is news again, the issue stays open.
    again = Ledger.from_value(stored)
    assert again.value() == stored and again.issue("gh") == 7
    later = message(revision="b" * 40)
    assert again.claim("gh", later.revision, later.event, later)
    assert again.issue("gh") == 7
    assert again.sinks["gh"].events[Event.OUT_OF_SYNC].state == DeliveryState.QUEUED
    with caplog.at_level(logging.WARNING, logger="govsync.agent.ledger"):
        assert Ledger.from_value({"gh": "not a record", "x": {"events": {"nope": {}}}}
                                 ).value() == {"x": {"revision": None, "events": {},
                                                     "issue": None}}
    assert [r.getMessage() for r in caplog.records] == [
        "the notification ledger's record of sink 'gh' cannot be read: left out (its "
        "events may be notified again)"]
