"""Which workspaces this agent leads (``StateStore.lead``: one agent per workspace
acts, the others read what it records), counted in the metrics, and given back
when the agent stops."""

from __future__ import annotations

import logging

from govsync.agent.metrics import Metrics
from govsync.errors import StateError
from govsync.state import LockHolder, StateStore, now
from govsync.state.records import AGENT_LEADER

log = logging.getLogger(__name__)


class Leadership:
    """This agent's leaderships, per environment (``name``) of a workspace."""

    def __init__(self, metrics: Metrics, holder: LockHolder | None = None) -> None:
        self.metrics = metrics
        self.holder = holder if holder is not None else LockHolder.me()

    def take(self, name: str, workspace: str, store: StateStore) -> bool:
        """Try to lead ``workspace`` (a take-over from a leader that is gone is logged and
        counted); whether this agent leads it now."""
        epoch = store.lead(workspace, self.holder)
        if epoch is None:
            self.metrics.leader.labels(name).set(0)
            return False
        leader = store.agent(workspace).get(AGENT_LEADER)
        if isinstance(leader, dict) and leader.get("tookOver") and isinstance(
                leader.get("previous"), dict):
            self.metrics.takeovers.labels(name).inc()
            log.warning("agent: took over %s from %s", name,
                        LockHolder.from_dict(leader["previous"]))
        self.metrics.leader.labels(name).set(1)
        return True

    def resign(self, name: str, workspace: str, store: StateStore) -> None:
        """Stop leading (lost, or the environment is gone from the project)."""
        store.resign(workspace)
        self.metrics.leader.labels(name).set(0)

    @staticmethod
    def release(workspace: str, store: StateStore) -> None:
        """Record that this agent gave its leadership back (not a take-over, then)."""
        try:
            leader = store.agent(workspace).get(AGENT_LEADER)
            if isinstance(leader, dict):
                store.set_agent(workspace, AGENT_LEADER, {**leader, "released": now()})
        except StateError as exc:
            log.warning("agent: %s", exc)
