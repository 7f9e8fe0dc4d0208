"""What a cycle's apply did (``Cycle.applied``), as the history record, the JSON API
and the log say it; ``LastApply``: the newest of them, with its revision."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Applied:
    """One apply by the agent.  ``summary`` None: it never started (a lost lock, a
    refused plan), and ``reason`` says why; else what it did, ``reason`` why it
    stopped early ('' it did not), ``plan`` the saved plan's file name it applied,
    ``interrupted`` whether the agent's stop cut it short."""

    at: str
    ok: bool
    reason: str
    summary: dict[str, int] | None = None
    plan: str | None = None
    interrupted: bool = False

    def as_dict(self) -> dict[str, Any]:
        if self.summary is None:
            return {"at": self.at, "ok": self.ok, "reason": self.reason}
        return {"at": self.at, "ok": self.ok, "summary": dict(self.summary),
                "reason": self.reason, "plan": self.plan, "interrupted": self.interrupted}

    @classmethod
    def from_dict(cls, data: Any) -> Applied | None:
        """As recorded (None for what is not an apply's record)."""
        if not isinstance(data, Mapping):
            return None
        summary = data.get("summary")
        try:
            counts = ({str(k): int(v) for k, v in summary.items()}
                      if isinstance(summary, Mapping) else None)
        except (TypeError, ValueError):
            counts = None
        if "summary" in data and counts is None:
            counts = {}
        plan = data.get("plan")
        return cls(str(data.get("at") or ""), bool(data.get("ok")),
                   str(data.get("reason") or ""), counts,
                   plan if isinstance(plan, str) else None, bool(data.get("interrupted")))


@dataclass(frozen=True)
class LastApply:
    """The newest apply of an environment, with the revision it applied."""

    applied: Applied
    revision: str | None = field(default=None)

    def as_dict(self) -> dict[str, Any]:
        return {**self.applied.as_dict(), "revision": self.revision}
