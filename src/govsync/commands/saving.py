"""The saved plan: ``plan --out``'s file (authenticated with the workspace's plan key,
with the git commit of its manifests) and ``show PLAN``'s verification.  A module of
its own: a plan shown, not saved, loads neither planfile.py nor audit.py."""

from __future__ import annotations

import contextlib

from govsync import audit, governance, planfile, runtime
from govsync.commands.workspace import Workspace, project_file, recorded_state
from govsync.errors import PlanKeyUnavailable, StateError
from govsync.governance import Governance
from govsync.manifests.manifest import ManifestSet
from govsync.plan import Plan
from govsync.planfile import SavedPlan
from govsync.redact import url as safe_url
from govsync.settings import Settings
from govsync.state import exists


def write_plan(plan: Plan, settings: Settings, path: str,
               manifests: ManifestSet | None = None, *,
               workspace: Workspace | None = None) -> str:
    """Save ``plan`` for ``govsync apply FILE``, authenticated with the workspace's plan
    key, with the git commit of the manifests it was made from (for the audit).

    Returns '' when it is authenticated, else why it is saved for review only
    (``apply --reviewed``): made without secrets, or by credentials that may not
    read the key (a read-only role).  ``workspace``: the open state the plan was
    made with."""

    plan.state = recorded_state(settings.state)
    plan.git = audit.git_state(audit.manifests_folder(
        manifests.files if manifests is not None else (), project_file(settings)))
    key: bytes | None = None
    with contextlib.ExitStack() as stack:
        if workspace is None:
            workspace = stack.enter_context(Workspace(settings))
        store = workspace.existing()
        if store is not None:
            snapshot = store.snapshot(settings.workspace, responses=False, create=False)
            if snapshot.lineage != plan.lineage or snapshot.serial != plan.serial:
                raise StateError("the state changed while the plan was made: run `govsync "
                                 "plan` again")
            plan.state_digest = snapshot.content_digest()
            if snapshot.lineage and plan.secrets_read:
                with contextlib.suppress(PlanKeyUnavailable):
                    key = store.plan_key(settings.workspace)
    planfile.write(plan, path, key)
    if key is not None:
        return ""
    return ("it was made without reading secrets" if not plan.secrets_read
            else "these credentials may not read the workspace's plan key")


def inspect_saved(saved: SavedPlan, settings: Settings) -> tuple[str, Governance | None]:
    """For ``show``: whether the plan verifies against its workspace's state (in words),
    and the governance that workspace records (None: none, or not readable)."""

    workspace = saved.plan.workspace
    if not exists(settings.state):
        return f"not checked: there is no state at {safe_url(settings.state)}", None
    try:
        with runtime.open_state(settings) as store:
            snapshot = store.snapshot(workspace, responses=False, create=False)
            record = governance.recorded(snapshot.governance, workspace)
            if not saved.authenticated:
                return saved.verification(b""), record
            try:
                key = store.plan_key(workspace, create=False)
            except PlanKeyUnavailable as exc:
                return f"not checked: {exc}", record
    except StateError as exc:
        return f"not checked: {exc}", None
    text = saved.verification(key)
    if saved.plan.serial != snapshot.serial and (
            saved.plan.state_digest != snapshot.content_digest()):
        text += (f"; stale: the state changed since it was made (serial {saved.plan.serial} "
                 f"-> {snapshot.serial}), so apply will refuse it")
    return text, record
