"""What an apply applies, as a type: the manifests planned now, a saved plan applied
exactly, or the manifests planned now and held to a reviewed plan.  And the
options of the run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from govsync.manifests.manifest import ManifestSet
from govsync.plan import Plan
from govsync.planfile import SavedPlan

if TYPE_CHECKING:
    from govsync.api.resource import Offers
    from govsync.apply import Reporter


@dataclass(frozen=True)
class Manifests:
    """``govsync apply PATHS``: plan the manifests under the lock and apply that plan."""

    manifests: ManifestSet

    @property
    def evidence(self) -> None:
        """No saved plan: no approvals come with this apply."""
        return None


@dataclass(frozen=True)
class Saved:
    """``govsync apply PLAN``: exactly the changes of a plan saved by ``plan --out``,
    authenticated with the workspace's key, not stale, applied at most once."""

    saved: SavedPlan

    @property
    def evidence(self) -> SavedPlan:
        """The plan whose approvals count for this apply."""
        return self.saved


@dataclass(frozen=True)
class Reviewed:
    """``govsync apply --reviewed PLAN``: the manifests planned again under the lock,
    which must equal the reviewed plan (made for review, a pull request's) change
    for change; its approvals then count, and it applies at most once."""

    manifests: ManifestSet
    reviewed: SavedPlan

    @property
    def evidence(self) -> SavedPlan:
        """The plan whose approvals count for this apply."""
        return self.reviewed


Source = Manifests | Saved | Reviewed


@dataclass(frozen=True)
class ApplyOptions:
    """How an apply runs (the command line's options, and the hooks of its caller)."""

    parallelism: int = 32
    # Drop orphans' entries from the state (the objects stay on the server).
    forget_orphans: bool = False
    # Seconds to wait for the workspace lock (0: refuse at once when it is held).
    lock_timeout: float = 0.0
    # Send to an endpoint other than the one the state was applied against.
    allow_endpoint_change: bool = False
    # Shown the plan before anything is sent; returns whether to go on (None: go on).
    confirm: Callable[[Plan], bool] | None = None
    reporter: Reporter | None = None
    # Once set (by another thread), the calls in flight end and are recorded, and
    # nothing more is sent (the agent on SIGTERM, a person's first Ctrl-C).
    stopping: threading.Event | None = None
    # What the endpoint was found to offer before (the agent keeps one per environment).
    offers: Offers | None = None
