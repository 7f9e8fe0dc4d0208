"""The library behind the commands: each command calls one function here.

Everything the CLI does is reachable without click: ``Settings`` carries the
global options, manifests come loaded (``manifests.load``) and saved plans
read (``planfile.read``) by the caller.

    workspace.py       the state as one operation opens it (Workspace), read_snapshot
    endpoint.py        the endpoint as the state records it; a rejected key
    reading.py         what is read from the server: the refresh, live references
    planning.py        plan, write_plan (plan --out), inspect_saved (show), drift
    sources.py         what an apply applies: Manifests, Saved, Reviewed; ApplyOptions
    preflight.py       every check before anything is sent: a Preflight
    applying.py        apply: the lock, preflight, then one client sends and records
    state_commands.py  govsync state ..., audit export
"""

from __future__ import annotations

from govsync.commands.applying import apply
from govsync.commands.endpoint import normal_endpoint
from govsync.commands.planning import Planned, drift, inspect_saved, plan, planned, write_plan
from govsync.commands.preflight import AuditFields, Preflight, required
from govsync.commands.reading import Early, early_snapshot, observe
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

__all__ = [
    "ApplyOptions",
    "AuditFields",
    "Early",
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
    "early_snapshot",
    "inspect_saved",
    "normal_endpoint",
    "observe",
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
