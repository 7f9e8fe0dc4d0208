"""What a notification says (``Message``), and one message on its way to one sink
(``Delivery``), and what became of it (``Result``): what the notifier, the sinks and
the ledger pass each other."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from govsync.agentconfig import Event, Sink
from govsync.formats import FORMAT_VERSION


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
    # The measured policies' impact, in short (cycle.impact_summary); none: not measured.
    impact: tuple[Mapping[str, Any], ...] = ()

    def payload(self) -> dict[str, Any]:
        return {"formatVersion": FORMAT_VERSION, "id": self.id, "event": str(self.event),
                "environment": self.environment, "workspace": self.workspace,
                "revision": self.revision, "status": self.status, "reason": self.reason,
                "summary": dict(self.summary), "url": self.url, "at": self.at,
                **({"impact": [dict(i) for i in self.impact]} if self.impact else {})}

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> Message:
        return cls(str(data["id"]), Event(data["event"]), str(data["environment"]),
                   str(data["workspace"]), data.get("revision"), str(data["status"]),
                   str(data.get("reason") or ""), dict(data.get("summary") or {}),
                   data.get("url"), str(data.get("at") or ""),
                   tuple(dict(i) for i in data.get("impact") or () if isinstance(i, dict)))

    def text(self) -> str:
        """One line for a person (Slack, GitHub)."""
        at = f" at {self.revision[:12]}" if self.revision else ""
        what = {Event.APPLIED: "applied", Event.FAILED: "apply failed"}.get(
            self.event, self.status)
        link = f" ({self.url})" if self.url else ""
        impact = f"; impact: {impact_words(self.impact)}" if self.impact else ""
        return f"govsync: {self.environment} {what}{at}: {self.reason}{impact}{link}"


def impact_words(found: Sequence[Mapping[str, Any]]) -> str:
    """``Policy/a decides 12 (recorded 3) of 1,000 logged requests other than allow``."""
    said = []
    for item in found:
        if not item.get("known"):
            said.append(f"{item['address']} unknown ({item.get('why') or 'not measured'})")
            continue
        was = (f" (recorded {item['recordedTotal']:,})" if item.get("recordedTotal")
               is not None else " (new)")
        of = f" of {item['evaluated']:,}" if item.get("evaluated") is not None else ""
        said.append(f"{item['address']} decides {item['newTotal']:,}{was}{of} logged "
                    f"requests other than allow over {item['window']}")
    return "; ".join(said)


def delivery_id(environment: str, sink: str, revision: str | None, event: Event) -> str:
    """The same for every attempt, replica and restart: what a receiver deduplicates on."""
    text = f"{environment}\0{sink}\0{revision or ''}\0{event}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class Delivery:
    """One message for one sink; ``issue``: the GitHub issue open for the environment;
    ``keys``: values the sink must not be given beside govsync's own (the API key of
    the environment it notifies about), checked again as it is sent."""

    sink: Sink
    message: Message
    issue: int | None = None
    attempts: int = 0
    keys: tuple[str, ...] = field(default=(), repr=False)


class Result(StrEnum):
    """What became of an attempt or a delivery: the results counted by
    ``govsync_notifications_total``."""

    SENT = "sent"
    FAILED = "failed"  # one attempt failed (it is tried again)
    DROPPED = "dropped"  # every attempt failed: given up
    DEDUPLICATED = "deduplicated"  # sent already for this revision and event
    REFUSED = "refused"  # the operator does not allow this sink: never sent
