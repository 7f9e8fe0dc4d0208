"""What the dashboard shows of an environment, read from the project and the state.

Read-only: manifests are loaded and planned without reading secrets' values
(``planning.plan(..., read_secrets=False)``, a pull request's plan), without
calling the API (no endpoint: the dashboard reads the state and the project,
nothing else), and the state is never written (a workspace that does not
exist reads as empty).  What a page shows is an ``EnvironmentView``: built
here, rendered by ``pages.py``, cached by ``Dashboard``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from govsync import approvals, audit, governance, impacts, runtime
from govsync.approvals import AllowedSigner
from govsync.commands import planning
from govsync.errors import ConfigError, GovsyncError, ManifestError, Problem
from govsync.manifests import load as load_manifests
from govsync.manifests.manifest import Context, ManifestSet
from govsync.plan import Action, Plan
from govsync.planfile import SavedPlan
from govsync.project import Selection
from govsync.redact import url as safe_url
from govsync.render import html
from govsync.render.graph import Graph, change_graph, dependency_graph
from govsync.render.html import Approvals, RuleProblem
from govsync.settings import Settings
from govsync.state import exists
from govsync.statuses import (
    AgentReport,
    Status,
    StatusProvider,
    record_type,
    status_of,
)

# History records read for a page (``govsync audit export`` writes them all).
HISTORY_LIMIT = 200
# A view older than its max_age is served while a new one is made only this many
# times max_age; beyond, a page waits for the new one.
STALE_SERVED = 4


@dataclass
class EnvironmentView:
    """One environment as the dashboard shows it (no secret anywhere in it)."""

    name: str
    workspace: str
    state: str  # safe_url: no password
    environment: str | None
    status: Status = Status.ERROR
    reason: str = ""
    plan: Plan | None = None
    graph: Graph = field(default_factory=Graph)
    # Rule errors (Blocked) or the manifests' problems (Error), each where and why.
    problems: list[RuleProblem] = field(default_factory=list)
    error: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    lock: str = ""
    approvals: Approvals = field(default_factory=Approvals)
    revision: str = ""
    made_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    seconds: float = 0.0
    agent: AgentReport | None = None

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((r for r in self.history if record_type(r) == kind), None)

    @property
    def objects(self) -> int:
        return len(self.plan.changes) if self.plan is not None else 0


def environments(settings: Settings) -> dict[str, Settings]:
    """The environments to show, each with the settings that read it.

    With ``--env``, or a project without environments, the one ``settings`` names
    (keyed by its environment's name, else its workspace's); else every environment
    of the project: its workspace, its state (or the state govsync was given).
    The API is never called: no endpoint."""
    selection = settings.selection
    project = selection.project
    if project is None or selection.environment is not None or not project.environments:
        return {selection.name or settings.workspace: replace(settings, endpoint=None)}
    return {name: replace(settings, endpoint=None, workspace=env.workspace or name,
                          state=env.state or settings.state,
                          selection=Selection(project, env, selection.overrides))
            for name, env in sorted(project.environments.items())}


def read_environment(name: str, settings: Settings, *, agent: AgentReport | None = None,
                     history_limit: int = HISTORY_LIMIT, root: str | None = None
                     ) -> EnvironmentView:
    """Plan one environment (without secrets or the API) and read its history.
    ``root``: the agent's checkout, outside which nothing is read (an environment
    whose paths or allowed signers lie outside it is shown with why, unplanned)."""
    start = time.perf_counter()
    selection = settings.selection
    view = EnvironmentView(name, settings.workspace, safe_url(settings.state), selection.name,
                           agent=agent)
    errors: list[Problem] = []
    try:
        refused = selection.outside(root) if root is not None else ""
        if refused:
            raise ConfigError(f"environment {name}: {refused}")
        manifests = load_manifests(selection.paths(()), context=Context(
            selection.variables(), selection.name))
        git = audit.git_state(audit.manifests_folder(
            manifests.files, selection.project.file if selection.project else None))
        if git:
            view.revision = git["commit"][:12] + (" (with uncommitted changes)"
                                                  if git["dirty"] else "")
        view.plan = planning.plan(manifests, settings, read_secrets=False, rule_errors=errors,
                                  impact=_impact(selection))
        view.graph = _graph(view.plan, dependency_graph(manifests.objects))
    except ManifestError as exc:
        view.error = (f"{len(exc.problems)} problem(s) in the manifests or the project; "
                      "`govsync validate` lists them")
        errors = list(exc.problems)
    except GovsyncError as exc:
        view.error = str(exc)
    view.problems = [RuleProblem(f"{p.file}:{p.line}:{p.col}" if p.file else "", p.message)
                     for p in errors]
    try:
        if exists(settings.state):
            with runtime.open_state(settings) as store:
                view.history = store.history(settings.workspace, history_limit)
                holder = store.running(settings.workspace)
                if holder is not None:
                    view.lock = f"{holder.user}@{holder.host} (pid {holder.pid}) since {holder.since}"
    except GovsyncError as exc:
        view.error = view.error or str(exc)
    if view.plan is not None:
        view.approvals = _approvals(view.plan, selection)
    view.status, view.reason = _status(view)
    if agent is not None:
        view.status = agent.status
        view.reason = agent.detail or view.reason
        view.revision = agent.revision or view.revision
    view.seconds = time.perf_counter() - start
    return view


def _impact(selection: Selection) -> impacts.Request | None:
    """What the dashboard measures of a policy change's impact: the project's file of
    recorded inputs replayed, never the endpoint's reports (a page view creates nothing
    on the server)."""
    request = impacts.requested(selection.impact)
    if request is None or request.from_file is None:
        return None
    return request._replace(reports=False)


def _graph(plan: Plan, graph: Graph) -> Graph:
    """The manifests' graph with each object's plan action (orphans and uncertain
    entries, which no manifest holds, as nodes of their own)."""
    actions: dict[str, Action | None] = dict(graph.nodes)
    for change in plan.changes:
        actions[change.address] = change.action
    return Graph(actions, graph.edges)


def _approvals(plan: Plan, selection: Selection) -> Approvals:
    """The approvals a plan of this workspace needs: those the workspace records (the
    plan's governance change says so when they differ), else the project's."""
    recorded = plan.governance["from"] if plan.governance is not None else None
    if recorded is not None:
        enforced = governance.Governance.from_dict(recorded, plan.workspace)
        source = f"recorded with workspace {plan.workspace!r}"
    else:
        enforced = governance.of_project(selection.project, selection.environment)
        place = selection.project.approvals if selection.project is not None else None
        source = place.allowed_signers if place is not None else ""
    if not enforced.required:
        return Approvals()
    signers = tuple(sorted({p for s in enforced.allowed(plan.workspace) for p in s.people}))
    env = f" --env {plan.environment}" if plan.environment else ""
    return Approvals(enforced.required, signers, source, note=(
        f"A plan made now has no signatures: save it (`govsync plan{env} --out plan.json`), "
        "then each approver runs `govsync approve plan.json --key KEY`."))


def plan_file(plan: Plan, selection: Selection, manifests: ManifestSet | None = None) -> str:
    """``govsync plan --format html``: the plan page as one self-contained file, with
    the approvals the workspace needs and the graph of the changes."""
    graph = change_graph(plan, manifests.objects if manifests is not None else None)
    return html.plan_file(plan, html.PlanPage(_approvals(plan, selection)), graph)


def saved_plan_file(saved: SavedPlan, verification: str, signers: list[AllowedSigner] | None,
                    required: int, source: str) -> str:
    """``govsync show PLAN --format html``: the plan page with the approvals ``PLAN.sig``
    holds (the valid ones of distinct allowed signers, and why the others do not
    count), whether the plan verifies, and its review digest."""
    sig_path = approvals.signature_path(saved.path)
    entries = approvals.read_signatures(sig_path)
    if signers is None:
        given = Approvals(required, (), source, note=(
            f"{len(entries)} signature(s) in {sig_path}, not checked: there are no allowed "
            "signers to check them against." if entries else f"No {sig_path}."))
    else:
        result = approvals.verify(approvals.review_message(saved.review_digest), entries,
                                  signers, sig_path)
        given = Approvals(
            required, tuple(sorted({p for s in signers for p in s.people})), source,
            tuple((a.principal, f"{a.key_type} {a.fingerprint}") for a in result.approvers),
            tuple(result.not_counted), note=f"Signatures: {sig_path}.")
    facts = (("saved plan", saved.path), ("authentication", verification),
             ("review digest", f"sha256:{saved.review_digest}"))
    return html.plan_file(saved.plan, html.PlanPage(given, facts=facts),
                          change_graph(saved.plan))


def _status(view: EnvironmentView) -> tuple[Status, str]:
    return status_of(view.plan, len(view.problems), view.lock, view.error)


def _word(report: AgentReport | None) -> tuple[Any, ...] | None:
    """What of the agent's report a view is made under (its time aside: a cycle that
    found the same does not make the view again)."""
    return None if report is None else (report.status, report.revision, report.detail)


class Dashboard:
    """Every environment's view, made once and made again when older than ``max_age``
    seconds: a page is served from the last view while a new one is made, if that
    view is younger than ``STALE_SERVED`` times ``max_age`` (an older one, the first
    load after a quiet while, waits for the new one).  With an agent, a view made
    under another word of the agent's (a cycle ended since: another status or
    revision) is made again before it is served: a page never shows a status or
    plan older than the agent's."""

    def __init__(self, sources: Mapping[str, Settings], *, statuses: StatusProvider | None = None,
                 max_age: float = 15.0, root: str | None = None) -> None:
        self.sources = dict(sources)
        self.root = root  # the agent's checkout: nothing outside it is read
        self.statuses = statuses
        self.max_age = max_age
        self._views: dict[str, EnvironmentView] = {}
        self._made: dict[str, float] = {}
        self._lock = threading.Lock()
        self._busy: dict[str, threading.Lock] = {n: threading.Lock() for n in self.sources}

    @property
    def names(self) -> list[str]:
        return list(self.sources)

    def view(self, name: str) -> EnvironmentView:
        """The environment's view (KeyError for an unknown name)."""
        settings = self.sources[name]
        report = self.statuses(name) if self.statuses is not None else None
        with self._lock:
            current = self._views.get(name)
            if current is not None and _word(current.agent) != _word(report):
                current = None  # the agent has moved on: that plan is not shown
            age = time.monotonic() - self._made[name] if current is not None else 0.0
        if current is not None and age < self.max_age:
            return current
        busy = self._busy[name]
        if current is not None and age < STALE_SERVED * self.max_age:
            if busy.acquire(blocking=False):  # made again in the background
                threading.Thread(target=self._refresh, args=(name, settings, busy),
                                 daemon=True).start()
            return current
        with busy:
            with self._lock:
                made = self._views.get(name)
                if (made is not None and _word(made.agent) == _word(report)
                        and time.monotonic() - self._made[name] < self.max_age):
                    return made  # made by another request meanwhile
            return self._make(name, settings)

    def _refresh(self, name: str, settings: Settings, busy: threading.Lock) -> None:
        try:
            self._make(name, settings)
        finally:
            busy.release()

    def _make(self, name: str, settings: Settings) -> EnvironmentView:
        agent = self.statuses(name) if self.statuses is not None else None
        made = read_environment(name, settings, agent=agent, root=self.root)
        with self._lock:
            self._views[name] = made
            self._made[name] = time.monotonic()
        return made
