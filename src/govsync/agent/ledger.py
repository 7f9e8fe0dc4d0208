"""The notifications' ledger: what was sent for one environment, per sink, kept in
the workspace's state (the agent's value ``notifications``), so that a message
goes out once per environment, revision and event, across restarts and replicas.

As stored (JSON)::

    {SINK: {"revision": REVISION, "issue": N or null,
            "events": {EVENT: {"state": "queued" | "sent" | "dropped", "at": TIME,
                               "id": DELIVERY-ID, "message": {...} (while queued),
                               "attempts": N, "error": TEXT}}}}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from govsync.agent.message import Delivery, Message, Result
from govsync.agent.sinks import Facts
from govsync.agentconfig import Event
from govsync.state import now

log = logging.getLogger(__name__)


class DeliveryState(StrEnum):
    """Where a claimed delivery stands."""

    QUEUED = "queued"  # claimed, not sent yet (its message kept, to be sent)
    SENT = "sent"
    DROPPED = "dropped"  # every attempt failed, or the operator refused the sink


@dataclass
class EventRecord:
    """One event's delivery to one sink at one revision."""

    state: DeliveryState
    at: str
    id: str
    message: Message | None = None  # while queued
    attempts: int | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"state": str(self.state), "at": self.at, "id": self.id}
        if self.message is not None:
            found["message"] = self.message.payload()
        if self.attempts is not None:
            found["attempts"] = self.attempts
        if self.error is not None:
            found["error"] = self.error
        return found

    @classmethod
    def from_dict(cls, data: Any) -> EventRecord | None:
        """A stored record (None for one that is not: it is forgotten)."""
        if not isinstance(data, dict):
            return None
        try:
            state = DeliveryState(str(data.get("state")))
        except ValueError:
            return None
        try:
            message = (Message.from_payload(data["message"])
                       if isinstance(data.get("message"), dict) else None)
        except (KeyError, ValueError):
            message = None
        attempts = data.get("attempts")
        error = data.get("error")
        return cls(state, str(data.get("at") or ""), str(data.get("id") or ""), message,
                   attempts if isinstance(attempts, int) else None,
                   error if isinstance(error, str) else None)


@dataclass
class SinkRecord:
    """What one sink was sent at the revision it last notified about, and the GitHub
    issue open for the environment."""

    revision: str | None
    events: dict[Event, EventRecord] = field(default_factory=dict)
    issue: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"revision": self.revision,
                "events": {str(e): r.as_dict() for e, r in self.events.items()},
                "issue": self.issue}

    @classmethod
    def from_dict(cls, data: Any) -> SinkRecord | None:
        if not isinstance(data, dict):
            return None
        events: dict[Event, EventRecord] = {}
        stored = data.get("events")
        for name, value in (stored.items() if isinstance(stored, dict) else ()):
            try:
                event = Event(name)
            except ValueError:
                continue
            record = EventRecord.from_dict(value)
            if record is not None:
                events[event] = record
        revision, issue = data.get("revision"), data.get("issue")
        return cls(revision if isinstance(revision, str) else None, events,
                   issue if isinstance(issue, int) and not isinstance(issue, bool) else None)


@dataclass
class Ledger:
    """What was sent for one environment, per sink: the revision, each event's
    delivery, and the GitHub issue that is open."""

    sinks: dict[str, SinkRecord] = field(default_factory=dict)

    @classmethod
    def from_value(cls, value: Any) -> Ledger:
        """The ledger as stored (an empty one for anything else).  A record that cannot
        be read is left out, and said: its sink may be sent an event again (the message's
        id is the same, for the receiver to deduplicate on)."""
        found = {}
        if value is not None and not isinstance(value, dict):
            log.warning("the notification ledger in the state is not a mapping: read as "
                        "empty (events may be notified again)")
        for sink, data in (value.items() if isinstance(value, dict) else ()):
            record = SinkRecord.from_dict(data)
            if record is not None:
                found[str(sink)] = record
            else:
                log.warning("the notification ledger's record of sink %r cannot be read: "
                            "left out (its events may be notified again)", str(sink)[:80])
        return cls(found)

    def claim(self, sink: str, revision: str | None, event: Event,
              message: Message) -> bool:
        """Whether ``event`` is news for this sink at this revision (then it is recorded
        as queued, with its message, until it is sent)."""
        entry = self.sinks.get(sink)
        if entry is None or entry.revision != revision:
            issue = entry.issue if entry is not None else None
            entry = self.sinks[sink] = SinkRecord(revision, {}, issue)
        if event in entry.events:
            return False
        entry.events[event] = EventRecord(DeliveryState.QUEUED, now(), message.id, message)
        return True

    def issue(self, sink: str) -> int | None:
        entry = self.sinks.get(sink)
        return entry.issue if entry is not None else None

    def settle(self, delivery: Delivery, result: Result, error: str, facts: Facts) -> bool:
        """Record a delivery's result; whether the ledger changed."""
        entry = self.sinks.get(delivery.sink.name)
        if entry is None:
            return False
        if facts.issue_changed:
            entry.issue = facts.issue
        event = entry.events.get(delivery.message.event)
        if event is None or event.id != delivery.message.id:
            return facts.issue_changed
        if result == Result.SENT:
            event.message = None
            event.state, event.at, event.attempts = DeliveryState.SENT, now(), delivery.attempts
        elif result in (Result.DROPPED, Result.REFUSED):
            event.message = None
            event.state, event.at, event.attempts = (DeliveryState.DROPPED, now(),
                                                     delivery.attempts)
            event.error = error
        else:
            event.error, event.attempts = error, delivery.attempts
        return True

    def queued(self) -> list[tuple[str, Message]]:
        """The deliveries claimed and not yet sent (a replica died, or stopped, before)."""
        return [(sink, event.message) for sink, entry in self.sinks.items()
                for event in entry.events.values()
                if event.state == DeliveryState.QUEUED and event.message is not None]

    def value(self) -> dict[str, Any]:
        """The ledger as stored (JSON)."""
        return {sink: entry.as_dict() for sink, entry in self.sinks.items()}
