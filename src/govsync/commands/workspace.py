"""The workspace's state as one operation opens it: once, when first needed, and never
made by a command that only reads."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Collection
from types import TracebackType

from govsync import redact, runtime
from govsync.errors import ManifestError
from govsync.manifests.manifest import ManifestSet
from govsync.plan import Plan, missing_secrets
from govsync.settings import Settings
from govsync.state import Snapshot, StateStore, empty_snapshot, exists
from govsync.values import secret_variables


class Workspace:
    """The state store of one operation (``plan --out``: the plan, the workspace made
    for it, the saved file), opened at most once and closed with the operation.

    ``existing()`` is for what only reads: None where there is no state yet, which
    it does not make; ``store()`` opens (and so makes) it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._store: StateStore | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.close()
        self._store = None

    def existing(self) -> StateStore | None:
        """The store, or None where the state does not exist (it is not made)."""
        if self._store is None and not exists(self.settings.state):
            return None
        return self.store()

    def store(self) -> StateStore:
        """The store, opened now if it is not yet (a SQLite file is made)."""
        if self._store is None:
            self._store = self._stack.enter_context(runtime.open_state(self.settings))
        return self._store


def check_secrets_set(manifests: ManifestSet, settings: Settings) -> None:
    """Every secret's variable is set: checked before any state is touched."""

    problems = missing_secrets(manifests, settings.environ)
    if problems:
        raise ManifestError(problems)


def with_secrets(settings: Settings, manifests: ManifestSet | None = None,
                 plan: Plan | None = None) -> Settings:
    """``settings`` knowing the values of the secrets ``manifests`` (or a saved ``plan``'s
    requests) read, those set: no answer of the API is shown, written or recorded
    with one (``Settings.secrets``, which the client is made with)."""
    variables: list[str] = []
    if manifests is not None:
        for manifest in manifests.objects.values():
            if manifest.holes:
                variables += secret_variables(manifest.template, manifest.holes)
    if plan is not None:
        for change in plan.changes:
            variables += secret_variables(change.request)
    found = [settings.environ.get(v, "") for v in dict.fromkeys(variables)]
    hidden = tuple(dict.fromkeys((*settings.hidden, *(v for v in found if v))))
    return dataclasses.replace(settings, hidden=hidden) if hidden != settings.hidden else settings


def read_snapshot(settings: Settings, *, responses: bool = False) -> Snapshot:
    """The workspace's state for a command that only reads: a state, or a workspace,
    that does not exist yet reads as empty and is not created."""

    if not exists(settings.state):
        return empty_snapshot(settings.workspace)
    with runtime.open_state(settings) as store:
        return store.snapshot(settings.workspace, responses=responses, create=False)


def recorded_elsewhere(settings: Settings, ids: Collection[str]) -> dict[str, tuple[str, str]]:
    """Which of ``ids`` another workspace of this state records (id -> (workspace,
    address)); none where there is no state yet."""

    if not ids or not exists(settings.state):
        return {}
    with runtime.open_state(settings) as store:
        return store.recorded_elsewhere(settings.workspace, ids)


def recorded_state(state: str) -> str:
    """The state as a saved plan records it: a file's absolute path, a URL masked."""
    return redact.url(state) if "://" in state else os.path.abspath(state)


def project_file(settings: Settings) -> str | None:
    project = settings.selection.project
    return project.file if project is not None else None
