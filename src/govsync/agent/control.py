"""``govsync agent pause ENV --reason TEXT`` and ``govsync agent resume ENV``:
recorded in the environment's workspace (the agent's value ``pause``, and a
history record for the audit), where every agent reads it at its next cycle:
a paused environment is planned, never applied."""

from __future__ import annotations

from typing import Any

from govsync import runtime
from govsync.agent.loop import PAUSE
from govsync.errors import ConfigError
from govsync.settings import Settings
from govsync.state import LockHolder, now

PAUSE_RECORD = "pause"
RESUME_RECORD = "resume"


def pause(settings: Settings, reason: str) -> dict[str, Any]:
    """Pause the agent's applies of ``settings``' workspace; the pause recorded."""
    if not reason.strip():
        raise ConfigError("give the reason of the pause: --reason TEXT (it is shown and kept)")
    me = LockHolder.me()
    record = {"reason": reason.strip(), "by": f"{me.user}@{me.host}", "at": now()}
    with runtime.open_state(settings) as store:
        store.set_agent(settings.workspace, PAUSE, record)
        store.add_history(settings.workspace, _history(PAUSE_RECORD, settings, record))
    return record


def resume(settings: Settings) -> dict[str, Any] | None:
    """Lift the pause of ``settings``' workspace: the pause lifted (None: there was none)."""
    with runtime.open_state(settings) as store:
        found = store.agent(settings.workspace).get(PAUSE)
        if found is None:
            return None
        store.set_agent(settings.workspace, PAUSE, None)
        me = LockHolder.me()
        store.add_history(settings.workspace, _history(
            RESUME_RECORD, settings, {"reason": found.get("reason") if isinstance(found, dict)
                                      else None, "by": f"{me.user}@{me.host}", "at": now()}))
    return found if isinstance(found, dict) else {}


def _history(kind: str, settings: Settings, record: dict[str, Any]) -> dict[str, Any]:
    me = LockHolder.me()
    return {"type": kind, "at": record["at"], "environment": settings.selection.name,
            "user": me.user, "host": me.host, "command": me.command,
            "reason": record.get("reason"), "ok": True}
