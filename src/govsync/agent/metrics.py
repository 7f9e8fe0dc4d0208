"""The agent's Prometheus metrics (contract section 9), in a registry of its own
(nothing process-wide): ``Metrics.text`` is what ``/metrics`` serves."""

from __future__ import annotations

from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from govsync.agent.cycle import Cycle
from govsync.statuses import Status

__all__ = ["CONTENT_TYPE", "Metrics"]

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.status = Gauge("govsync_environment_status",
                            "1 for the environment's current status, 0 for the others",
                            ["environment", "status"], registry=r)
        self.pending = Gauge("govsync_pending_changes", "Changes planned and not applied",
                             ["environment"], registry=r)
        self.uncertain = Gauge("govsync_uncertain_entries",
                               "State entries whose create has an unknown outcome",
                               ["environment"], registry=r)
        self.drifted = Gauge("govsync_drifted_objects",
                             "Recorded objects changed outside govsync or missing on the "
                             "server, as the last refresh found them", ["environment"],
                             registry=r)
        self.cycle_seconds = Histogram("govsync_cycle_seconds",
                                       "Seconds one environment's cycle took (plan and apply)",
                                       ["environment"], buckets=BUCKETS, registry=r)
        self.last_apply = Gauge("govsync_last_apply_timestamp_seconds",
                                "When the agent last applied the environment, by result",
                                ["environment", "result"], registry=r)
        self.notifications = Counter("govsync_notifications",
                                     "Notification attempts by sink and result (sent, failed: "
                                     "an attempt failed, dropped: given up, deduplicated)",
                                     ["sink", "result"], registry=r)
        self.leader = Gauge("govsync_leader", "1 when this agent acts for the environment",
                            ["environment"], registry=r)
        self.takeovers = Counter("govsync_takeovers",
                                 "Times this agent took over an environment from another",
                                 ["environment"], registry=r)
        self.cycles = Counter("govsync_cycles", "Cycles this agent ran, by the status each "
                              "found before any apply it made (Drifted: outside changes, "
                              "put back by a self-heal)", ["environment", "status"],
                              registry=r)
        self.healed = Counter("govsync_healed_objects", "Objects a self-heal put back "
                              "(changed outside govsync or missing on the server)",
                              ["environment"], registry=r)

    def observe(self, cycle: Cycle, *, ran: bool) -> None:
        """An environment's cycle: one this agent ran (``ran``) or one it read."""
        name = cycle.environment
        for status in Status:
            self.status.labels(name, str(status)).set(1 if status == cycle.status else 0)
        self.pending.labels(name).set(cycle.pending)
        self.uncertain.labels(name).set(cycle.uncertain)
        self.drifted.labels(name).set(cycle.drifted)
        if ran:
            self.cycle_seconds.labels(name).observe(cycle.seconds)
            self.cycles.labels(name, str(cycle.found or cycle.status)).inc()
            if cycle.healed:
                self.healed.labels(name).inc(cycle.healed)
        applied = cycle.applied
        if applied is not None and applied.at:
            try:
                when = datetime.fromisoformat(applied.at.replace("Z", "+00:00"))
            except ValueError:
                return
            result = "ok" if applied.ok else "failed"
            self.last_apply.labels(name, result).set(when.timestamp())

    def text(self) -> bytes:
        return generate_latest(self.registry)
