"""The agent's notifications: for each environment it leads, which of its sinks the
operator refuses, the ledger of what was sent (kept in the workspace's state, the
agent's value ``notifications``), and the deliveries handed to the ``Notifier``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from govsync.agent import journal
from govsync.agent.cycle import Cycle, Target
from govsync.agent.ledger import Ledger
from govsync.agent.message import Delivery, Message, Result, delivery_id
from govsync.agent.metrics import Metrics
from govsync.agent.notify import Notifier, SinkHealth
from govsync.agent.reach import SinkPolicy
from govsync.agent.sinks import Facts
from govsync.agentconfig import Event, Sink
from govsync.errors import StateError
from govsync.state import StateStore, now

log = logging.getLogger(__name__)

NOTIFICATIONS = "notifications"

# Where an environment's ledger is kept: its store and workspace (None: gone).
StoreOf = Callable[[str], tuple[StateStore, str] | None]


class Notifications:
    """Each environment's sinks, ledger and deliveries (a ledger only while leading)."""

    def __init__(self, environ: Mapping[str, str], policy: SinkPolicy, metrics: Metrics,
                 store_of: StoreOf, *, url: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.environ = environ
        self.policy = policy
        self.metrics = metrics
        self.store_of = store_of
        self.url = url
        self.notifier = Notifier(environ, self._settled, policy, transport=transport)
        self._ledgers: dict[str, Ledger] = {}
        self._refused: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()

    def check(self, target: Target) -> None:
        """Refuse, by name, the sinks the operator does not allow (logged once each)."""
        refused = {}
        before = self._refused.get(target.name, {})
        for sink in target.agent.notify or ():
            why = self.policy.refusal(sink, self.environ, keys=[target.settings.api_key])
            if why is not None:
                refused[sink.name] = why
                if before.get(sink.name) != why:
                    log.warning("agent: %s: %s", target.name, why)
                    self.metrics.notifications.labels(sink.name, Result.REFUSED).inc()
        with self._lock:
            self._refused[target.name] = refused

    def refused(self, name: str) -> dict[str, str]:
        """The environment's sinks the operator does not allow: name -> why."""
        with self._lock:
            return dict(self._refused.get(name, {}))

    def health(self, name: str) -> dict[str, SinkHealth]:
        return {sink: h for (env, sink), h in self.notifier.health.items() if env == name}

    def leading(self, target: Target, stored: Any) -> None:
        """The environment is led by this agent: its ledger read (``stored``: the
        agent's value), once, and what a previous leader claimed and did not send
        sent now."""
        with self._lock:
            if target.name in self._ledgers:
                return
            ledger = self._ledgers[target.name] = Ledger.from_value(stored)
            sinks = {s.name: s for s in self._sinks(target)}
            resent = [Delivery(sinks[sink], message, ledger.issue(sink), keys=_keys(target))
                      for sink, message in ledger.queued() if sink in sinks]
        for delivery in resent:
            self.notifier.send(delivery)

    def resigned(self, name: str) -> None:
        """Not led any more: its ledger is the next leader's."""
        with self._lock:
            self._ledgers.pop(name, None)

    def forget(self, name: str) -> None:
        with self._lock:
            self._ledgers.pop(name, None)
            self._refused.pop(name, None)

    def _sinks(self, target: Target) -> list[Sink]:
        refused = self._refused.get(target.name, {})
        return [s for s in target.agent.notify or () if s.name not in refused]

    def _link(self, name: str) -> str | None:
        return f"{self.url.rstrip('/')}/environments/{name}" if self.url else None

    def cycle_ended(self, target: Target, store: StateStore, result: Cycle) -> None:
        """The cycle's events, each claimed in the ledger once per sink and revision
        (the ledger recorded first: what is not recorded is not sent), then sent."""
        deliveries = []
        with self._lock:
            ledger = self._ledgers.get(target.name)
            sinks = self._sinks(target)
            if not sinks or ledger is None:
                return
            for sink in sinks:
                for event in result.events():
                    if event not in sink.events:
                        continue
                    message = message_of(result, sink.name, event,
                                         self._link(result.environment))
                    if not ledger.claim(sink.name, result.revision, event, message):
                        self.metrics.notifications.labels(sink.name, Result.DEDUPLICATED).inc()
                        continue
                    deliveries.append(Delivery(sink, message, ledger.issue(sink.name),
                                               keys=_keys(target)))
            if not deliveries:
                return
            try:
                store.set_agent(result.workspace, NOTIFICATIONS, ledger.value())
            except StateError as exc:
                # Not claimed: not sent (the next cycle, or leader, claims it again).
                log.warning("agent: notifications of %s not recorded, not sent: %s",
                            result.environment, exc)
                self._ledgers.pop(target.name, None)
                return
        for delivery in deliveries:
            self.notifier.send(delivery)

    def _settled(self, delivery: Delivery, result: Result, error: str, facts: Facts) -> None:
        """A notifier thread's report of a delivery: counted, logged, kept in the ledger."""
        self.metrics.notifications.labels(delivery.sink.name, result).inc()
        message = delivery.message
        journal.delivered(message.environment, delivery.sink.name, message.event, result,
                          error)
        with self._lock:
            ledger = self._ledgers.get(message.environment)
            if ledger is None or not ledger.settle(delivery, result, error, facts):
                return
            value = ledger.value()
        where = self.store_of(message.environment)
        if where is None:
            return
        store, workspace = where
        try:
            store.set_agent(workspace, NOTIFICATIONS, value)
        except StateError as exc:
            log.warning("agent: a notification's result was not recorded: %s", exc)

    def close(self, timeout: float) -> None:
        self.notifier.close(timeout)


def message_of(result: Cycle, sink: str, event: Event, link: str | None) -> Message:
    """What a sink is told of a cycle's event: its status, reason, summary and the
    measured policies' impact."""
    return Message(delivery_id(result.environment, sink, result.revision, event), event,
                   result.environment, result.workspace, result.revision, str(result.status),
                   result.reason, {k: n for k, n in result.summary.items() if n}, link, now(),
                   tuple(result.impact))


def _keys(target: Target) -> tuple[str, ...]:
    """What no sink of ``target`` is given beside govsync's own credentials."""
    key = target.settings.api_key
    return (key,) if key else ()
