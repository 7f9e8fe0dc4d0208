"""govsync: access-governance configuration as code.

The command line is a thin layer over a library; a program can call it too::

    import govsync
    from govsync import commands

    settings = govsync.Settings(endpoint="local", state=".govsync/state.db")
    manifests = govsync.load(["manifests/"])
    plan = commands.plan(manifests, settings)
    plan, result = commands.apply(govsync.Manifests(manifests), settings)
    report = commands.drift(manifests, settings)

Here are the commands' functions (``govsync.commands``, one a command) and the
types they take and return.  ``plan``, ``apply`` and ``drift`` are names of this
package's modules (the planner, the applier, the drift report), so those three
commands are ``commands.plan``, ``commands.apply`` and ``commands.drift``.

Each name loads its module when first asked for (PEP 562: ``LAZY``, which
docs/architecture.md's test reads as this face's imports), so ``import govsync``
loads nothing else, and ``govsync validate`` none of the commands.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each name and the module it comes from: the library's one lazy face, at its edge (the
# package `python -m govsync` and every program loads first), so `import govsync` loads nothing
# more; docs/architecture.md's test reads it as this package's imports.
LAZY = {
    "ApplyOptions": "govsync.commands.sources",
    "Manifests": "govsync.commands.sources",
    "Planned": "govsync.commands.planning",
    "Reviewed": "govsync.commands.sources",
    "Saved": "govsync.commands.sources",
    "Source": "govsync.commands.sources",
    "audit_export": "govsync.commands.state_commands",
    "inspect_saved": "govsync.commands.saving",
    "planned": "govsync.commands.planning",
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
    "write_plan": "govsync.commands.saving",
    "Settings": "govsync.settings",
    "Manifest": "govsync.manifests",
    "ManifestSet": "govsync.manifests",
    "load": "govsync.manifests",
    "Action": "govsync.plan",
    "Change": "govsync.plan",
    "Plan": "govsync.plan",
    "DriftReport": "govsync.drift",
    "SavedPlan": "govsync.planfile",
    "Entry": "govsync.state",
    "Snapshot": "govsync.state",
    "StateStore": "govsync.state",
    "open_store": "govsync.state",
    "ApiError": "govsync.errors",
    "ConfigError": "govsync.errors",
    "GovsyncError": "govsync.errors",
    "GraphError": "govsync.errors",
    "ManifestError": "govsync.errors",
    "PlanError": "govsync.errors",
    "StateError": "govsync.errors",
}

if TYPE_CHECKING:
    from govsync.commands.planning import Planned, planned
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
    from govsync.drift import DriftReport
    from govsync.errors import (
        ApiError,
        ConfigError,
        GovsyncError,
        GraphError,
        ManifestError,
        PlanError,
        StateError,
    )
    from govsync.manifests import Manifest, ManifestSet, load
    from govsync.plan import Action, Change, Plan
    from govsync.planfile import SavedPlan
    from govsync.settings import Settings
    from govsync.state import Entry, Snapshot, StateStore, open_store


def __getattr__(name: str) -> Any:
    """A name of ``LAZY``, imported from its module when first asked for, then kept."""
    try:
        module = LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[__name__], name, value)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *LAZY})


__all__ = [
    "Action",
    "ApiError",
    "ApplyOptions",
    "Change",
    "ConfigError",
    "DriftReport",
    "Entry",
    "GovsyncError",
    "GraphError",
    "Manifest",
    "ManifestError",
    "ManifestSet",
    "Manifests",
    "Plan",
    "PlanError",
    "Planned",
    "Reviewed",
    "Saved",
    "SavedPlan",
    "Settings",
    "Snapshot",
    "Source",
    "StateError",
    "StateStore",
    "audit_export",
    "inspect_saved",
    "load",
    "open_store",
    "planned",
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
