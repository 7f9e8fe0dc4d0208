"""``govsync agent pause ENV --reason TEXT`` and ``govsync agent resume ENV``:
recorded in the environment's workspace (the agent's value ``pause``, and a
history record for the audit), where every agent reads it at its next cycle:
a paused environment is planned, never applied.

``govsync agent accept ENV --reason TEXT``: an operator lets the agent take up an
environment the repository added (or renamed) onto an endpoint another
workspace of the state governs; recorded as the agent's value ``accepted``
(with the endpoint accepted) and a history record.  Its first apply still
needs the governing workspace's approvals."""

from __future__ import annotations

from typing import Any

from govsync import governance, runtime
from govsync.agent.cycle import ACCEPTED
from govsync.agent.loop import PAUSE
from govsync.commands.endpoint import normal_endpoint
from govsync.errors import ConfigError
from govsync.redact import url as safe_url
from govsync.settings import Settings
from govsync.state import LockHolder, now

PAUSE_RECORD = "pause"
RESUME_RECORD = "resume"
ACCEPT_RECORD = "accept"


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


def accept(settings: Settings, reason: str) -> str:
    """Accept ``settings``' new workspace onto the governed endpoint it names; what was
    done, in words (nothing, where there is nothing to accept)."""
    if not reason.strip():
        raise ConfigError("give the reason: --reason TEXT (it is shown and kept)")
    if not settings.endpoint:
        raise ConfigError("the environment names no endpoint: pass --endpoint URL (the one "
                          "the agent applies it to)")
    endpoint = normal_endpoint(settings.endpoint)
    with runtime.open_state(settings) as store:
        workspace = settings.workspace
        if store.snapshot(workspace, responses=False, create=False).governance is not None:
            return (f"nothing to accept: workspace {workspace!r} records its governance "
                    "already")
        found = governance.governors(store.governed(), workspace, endpoint)
        if not found:
            return (f"nothing to accept: no other workspace governs {safe_url(endpoint)}")
        me = LockHolder.me()
        record = {"endpoint": endpoint, "governors": [g.workspace for g in found],
                  "reason": reason.strip(), "by": f"{me.user}@{me.host}", "at": now()}
        store.set_agent(workspace, ACCEPTED, record)
        store.add_history(workspace, _history(ACCEPT_RECORD, settings, record))
    return (f"accepted: the agent plans workspace {workspace!r} on {safe_url(endpoint)}; its "
            f"first apply needs the approvals of {found[0].named()}")


def _history(kind: str, settings: Settings, record: dict[str, Any]) -> dict[str, Any]:
    me = LockHolder.me()
    return {"type": kind, "at": record["at"], "environment": settings.selection.name,
            "user": me.user, "host": me.host, "command": me.command,
            "reason": record.get("reason"), "ok": True}
