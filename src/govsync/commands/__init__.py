"""The library behind the commands: each command calls one function here.

Everything the CLI does is reachable without click: ``Settings`` carries the
global options, manifests come loaded (``manifests.load``) and saved plans
read (``planfile.read``) by the caller.

    workspace.py       the state as one operation opens it (Workspace), read_snapshot
    endpoint.py        the endpoint as the state records it; a rejected key
    reading.py         what is read from the server: the refresh, live references
    planning.py        plan
    saving.py          write_plan (plan --out), inspect_saved (show)
    drifting.py        drift
    sources.py         what an apply applies: Manifests, Saved, Reviewed; ApplyOptions
    preflight.py       every check before anything is sent: a Preflight
    applying.py        apply: the lock, preflight, then one client sends and records
    state_commands.py  govsync state ..., audit export
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from govsync import lazy

# Each name of the face and the module that holds it, imported when the name is first
# asked for (PEP 562): `plan` loads planning.py, not apply's preflight and sources nor
# the state commands (issue 31: 10 ms of a plan's start-up).  Data, not code:
# docs/architecture.md's test reads this table as imports of the face.
LAZY = {
    "apply": "govsync.commands.applying",
    "normal_endpoint": "govsync.commands.endpoint",
    "Planned": "govsync.commands.planning",
    "drift": "govsync.commands.drifting",
    "inspect_saved": "govsync.commands.saving",
    "plan": "govsync.commands.planning",
    "planned": "govsync.commands.planning",
    "write_plan": "govsync.commands.saving",
    "AuditFields": "govsync.commands.preflight",
    "Preflight": "govsync.commands.preflight",
    "required": "govsync.commands.preflight",
    "ApplyOptions": "govsync.commands.sources",
    "Manifests": "govsync.commands.sources",
    "Reviewed": "govsync.commands.sources",
    "Saved": "govsync.commands.sources",
    "Source": "govsync.commands.sources",
    "audit_export": "govsync.commands.state_commands",
    "state_entry": "govsync.commands.state_commands",
    "state_export": "govsync.commands.state_commands",
    "state_forget": "govsync.commands.state_commands",
    "state_history": "govsync.commands.state_commands",
    "state_import": "govsync.commands.state_commands",
    "state_import_all": "govsync.commands.state_commands",
    "state_move": "govsync.commands.state_commands",
    "state_readonly_role": "govsync.commands.state_commands",
    "state_resolve": "govsync.commands.state_commands",
    "state_unlock": "govsync.commands.state_commands",
    "Workspace": "govsync.commands.workspace",
    "read_snapshot": "govsync.commands.workspace",
    "Settings": "govsync.settings",
}

if TYPE_CHECKING:
    from govsync.commands.applying import apply
    from govsync.commands.drifting import drift
    from govsync.commands.endpoint import normal_endpoint
    from govsync.commands.planning import Planned, plan, planned
    from govsync.commands.preflight import AuditFields, Preflight, required
    from govsync.commands.saving import inspect_saved, write_plan
    from govsync.commands.sources import ApplyOptions, Manifests, Reviewed, Saved, Source
    from govsync.commands.state_commands import (
        audit_export,
        state_entry,
        state_export,
        state_forget,
        state_history,
        state_import,
        state_import_all,
        state_move,
        state_readonly_role,
        state_resolve,
        state_unlock,
    )
    from govsync.commands.workspace import Workspace, read_snapshot
    from govsync.settings import Settings


__getattr__, __dir__ = lazy.face(__name__, LAZY)


__all__ = [
    "ApplyOptions",
    "AuditFields",
    "Manifests",
    "Planned",
    "Preflight",
    "Reviewed",
    "Saved",
    "Settings",
    "Source",
    "Workspace",
    "apply",
    "audit_export",
    "drift",
    "inspect_saved",
    "normal_endpoint",
    "plan",
    "planned",
    "read_snapshot",
    "required",
    "state_entry",
    "state_export",
    "state_forget",
    "state_history",
    "state_import",
    "state_import_all",
    "state_move",
    "state_readonly_role",
    "state_resolve",
    "state_unlock",
    "write_plan",
]
