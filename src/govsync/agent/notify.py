"""Notifications: ``Notifier`` takes each delivery to its sink (``sinks.py``: a
generic webhook, Slack, GitHub; one class each), on a thread and a queue per
sink, with backoff; ``ledger.py`` keeps what was sent.

What users of Flux's notification-controller and Argo CD's notifications ask
for, and what this does:

* no spam, no duplicates: the agent sends a message once per environment,
  revision and event (``ledger.Ledger``), across restarts and replicas, since the
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
is read within ``sinks.MAX_ANSWER`` bytes and ``DEADLINE`` seconds in all (a slow
trickle included), and never shown: the status says its HTTP status or one of
a few fixed reasons.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from govsync.agent.message import Delivery, Message, Result
from govsync.agent.reach import Refused, SinkPolicy
from govsync.agent.sinks import DEADLINE, SINKS, Facts, SinkTransport
from govsync.errors import AgentError
from govsync.state import now

__all__ = ["BACKOFF", "Delivery", "Message", "Notifier", "OnResult", "Result", "SinkHealth"]

log = logging.getLogger(__name__)

# Seconds between the attempts of one delivery; then it is dropped (and counted).
BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 60.0, 60.0, 60.0)


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
OnResult = Callable[[Delivery, Result, str, Facts], None]


class Notifier:
    """A thread and a queue per (environment, sink); ``send`` never waits.
    ``transport``: what the sinks send through (the agent's ``SinkTransport`` by
    default; ``httpx.MockTransport`` in a test)."""

    def __init__(self, environ: Mapping[str, str], on_result: OnResult, policy: SinkPolicy, *,
                 backoff: tuple[float, ...] = BACKOFF, deadline: float = DEADLINE,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.environ = environ
        self.on_result = on_result
        self.policy = policy
        self.backoff = backoff
        self.deadline = deadline
        self.transport = transport if transport is not None else SinkTransport(environ, deadline)
        self.health: dict[tuple[str, str], SinkHealth] = {}
        self._queues: dict[tuple[str, str], queue.Queue[Delivery | None]] = {}
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()
        self._lock = threading.Lock()

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
                self.on_result(delivery, Result.REFUSED, str(exc), Facts())
                return
            except (AgentError, OSError) as exc:  # OSError: no file for a socket...
                error = str(exc) if isinstance(exc, AgentError) else (
                    f"{delivery.sink.type} sink {delivery.sink.name}: "
                    f"{exc.strerror or type(exc).__name__}")
                health.failed += 1
                health.last_error, health.last_error_at = error, now()
                log.warning("notification to %s failed (attempt %d): %s", delivery.sink.name,
                            delivery.attempts, error)
                self.on_result(delivery, Result.FAILED, error, Facts())
                continue
            health.sent += 1
            self.on_result(delivery, Result.SENT, "", facts)
            return
        health.dropped += 1
        self.on_result(delivery, Result.DROPPED, health.last_error, Facts())

    def deliver(self, delivery: Delivery) -> Facts:
        """One attempt, by the sink's class (``SINKS``); what to remember, or AgentError
        (Refused: the operator does not allow this sink, checked here again before
        sending)."""
        sink = delivery.sink
        refusal = self.policy.refusal(sink, self.environ, keys=delivery.keys)
        if refusal is not None:
            raise Refused(refusal)
        client = SINKS[sink.type](sink, self.environ, self.policy, self.transport,
                                  self.deadline)
        return client.deliver(delivery)
