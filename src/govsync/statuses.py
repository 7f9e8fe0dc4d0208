"""An environment's one status (contract section 9), and how it is decided.

The dashboard (``ui/``) and the agent (``agent/``) both say it; it lives here,
below both, so that neither reads it from the other.  ``status_of`` decides it
from a plan; ``AgentReport`` is the agent's word on an environment, which the
dashboard shows as it is (through a ``StatusProvider``); ``RecordType`` names
the kinds of history records (an apply's, a drift check's), ``Outcome`` how one
ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from govsync.plan import REFRESH_CHECK, Action, Change, CheckStatus, DriftKind, Plan, Why


class Status(StrEnum):
    """An environment's one status (contract section 9), worst first."""

    ERROR = "Error"
    PAUSED = "Paused"
    LOCKED = "Locked"
    BLOCKED = "Blocked"
    UNCERTAIN = "Uncertain"
    DRIFTED = "Drifted"
    OUT_OF_SYNC = "OutOfSync"
    SYNCED = "Synced"


class RecordType(StrEnum):
    """The kinds of history records: an apply's has no ``type``; a record of a drift
    check (the agent's cycles) has ``type: drift``."""

    APPLY = "apply"
    DRIFT = "drift"


class Outcome(StrEnum):
    """How a history record ended (its ``ok``), as the dashboard shows and filters it."""

    OK = "ok"
    FAILED = "failed"


def outcome_of(record: Mapping[str, Any]) -> Outcome:
    return Outcome.OK if record.get("ok") else Outcome.FAILED


def record_type(record: Mapping[str, Any]) -> str:
    """A history record's kind (an apply's when it names none)."""
    return str(record.get("type") or RecordType.APPLY)


@dataclass(frozen=True)
class AgentReport:
    """What the agent knows of an environment, which the dashboard shows as it is:
    the agent plugs in a ``StatusProvider`` that returns these."""

    status: Status
    revision: str | None = None
    last_cycle: str | None = None  # ISO time
    detail: str = ""


StatusProvider = Callable[[str], AgentReport | None]


def drift_only(change: Change) -> bool:
    """Whether a change only puts back what changed outside govsync (or makes again what
    is missing on the server): no git change asks for it."""
    return change.why is not None and change.why.why in (Why.OUTSIDE, Why.MISSING)


def status_of(plan: Plan | None, rule_errors: int, lock: str, error: str) -> tuple[Status, str]:
    """An environment's one status, and why: from its plan, its rule errors, who holds
    its lock ('' nobody) and the error that kept it from being planned ('' none).
    The dashboard's and the agent's."""
    if error or plan is None:
        return Status.ERROR, error or "not planned"
    unread = next((c for c in plan.checks
                   if c.name == REFRESH_CHECK and c.status == CheckStatus.FAILED), None)
    if unread is not None:
        # Not Synced on a partial picture: what could not be read may have drifted.
        return Status.ERROR, f"the server could not be read whole: {unread.detail}"
    if lock:
        return Status.LOCKED, f"an apply holds the lock: {lock}"
    blocked = len(plan.blocked())
    if blocked or rule_errors:
        parts = ([f"{blocked} blocked change(s)"] if blocked else []) + (
            [f"{rule_errors} rule error(s)"] if rule_errors else [])
        return Status.BLOCKED, "; ".join(parts)
    summary = plan.summary()
    if summary[Action.UNCERTAIN]:
        return Status.UNCERTAIN, f"{summary[Action.UNCERTAIN]} uncertain entr(ies) to resolve"
    pending = [c for c in plan.changes if c.action != Action.NOOP and not drift_only(c)]
    if plan.drift and not pending and plan.governance is None:
        # Contract 12, amended: OutOfSync while a git change is pending, else Drifted.
        missing = sum(1 for d in plan.drift if d.kind == DriftKind.MISSING)
        return Status.DRIFTED, (f"{len(plan.drift) - missing} object(s) changed outside "
                                f"govsync, {missing} missing on the server")
    if plan.has_changes():
        counts = ", ".join(f"{n} {a}" for a, n in summary.items() if n and a != Action.NOOP)
        return Status.OUT_OF_SYNC, (f"changes pending: {counts}" if counts
                                    else "the workspace's governance changes")
    return Status.SYNCED, "the manifests match the recorded state"
