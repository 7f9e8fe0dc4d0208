"""What the agent knows of each environment (``Known``), and how it shows it: the
JSON of ``/api/v1/environments`` and the dashboard's ``AgentReport``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from govsync.agent.applied import LastApply
from govsync.agent.cycle import Cycle, Target
from govsync.agent.notify import SinkHealth
from govsync.manifests.loader import ReadCache
from govsync.redact import url as safe_url
from govsync.statuses import AgentReport


@dataclass
class Known:
    """What the agent knows of one environment."""

    target: Target
    cycle: Cycle | None = None
    last_apply: LastApply | None = None  # the newest cycle's apply that applied
    leading: bool = False
    leader: dict[str, Any] | None = None
    paused: dict[str, Any] | None = None
    frozen: str | None = None
    due: float = 0.0
    # Its manifests as last checked: a cycle parses only the files that changed.
    reader: ReadCache = field(default_factory=ReadCache)

    def report(self) -> AgentReport | None:
        """The agent's word on the environment, for the dashboard (None: no cycle yet)."""
        found = self.cycle
        if found is None:
            return None
        return AgentReport(found.status, found.revision, found.at, found.reason)

    def as_json(self, *, revision: str | None, interval: float,
                health: dict[str, SinkHealth], refused: dict[str, str]) -> dict[str, Any]:
        """``/api/v1/environments/{name}``: its status and what stands behind it
        (``revision``: the agent's, before its first cycle)."""
        target, found = self.target, self.cycle
        return {
            "name": target.name,
            "workspace": target.workspace,
            "state": safe_url(target.settings.state),
            "status": str(found.status) if found is not None else None,
            "reason": found.reason if found is not None else "not planned yet",
            "revision": found.revision if found is not None else revision,
            "lastCycle": found.as_dict() if found is not None else None,
            "lastApply": self.last_apply.as_dict() if self.last_apply is not None else None,
            "pendingChanges": found.pending if found is not None else None,
            "uncertainEntries": found.uncertain if found is not None else None,
            "heldBack": found.held if found is not None else [],
            "autoApply": bool(target.agent.auto_apply),
            "interval": interval,
            "paused": self.paused,
            "frozen": self.frozen,
            "acting": self.leading,
            "leader": self.leader,
            "notifications": {name: {**(health[name].as_dict() if name in health else {}),
                                     **({"refused": refused[name]} if name in refused else {})}
                              for name in sorted({*health, *refused})},
        }
