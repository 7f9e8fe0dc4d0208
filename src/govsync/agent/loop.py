"""The agent: every interval (or at once, woken by a verified push), the checkout
brought current and each environment's cycle run, by the one agent that leads it.

Leadership (``StateStore.lead``) is per workspace and held for as long as the
agent runs; an agent that does not lead an environment reads the status its
leader recorded, and tries to lead it at each of its intervals, so it takes
over within one interval of the leader's end.  Each cycle's result is kept in
the workspace's history and as the agent's ``cycle`` value, so a restarted
agent, or another replica, shows it.  ``stop`` (the command line calls it on
SIGTERM) lets the calls in flight end and be recorded, then ``run`` returns.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from govsync import agentconfig, envvars, project, runtime
from govsync.agent import cycle as cycles
from govsync.agent import journal, readiness
from govsync.agent.applied import LastApply
from govsync.agent.checkout import Checkout, revision_of
from govsync.agent.cycle import Cycle, Target
from govsync.agent.leadership import Leadership
from govsync.agent.metrics import Metrics
from govsync.agent.notifications import NOTIFICATIONS, Notifications
from govsync.agent.reach import SinkPolicy
from govsync.agent.recall import recall
from govsync.agent.views import Known
from govsync.agentconfig import DEFAULT_INTERVAL
from govsync.commands.endpoint import normal_endpoint
from govsync.errors import GovsyncError, LockLostError, ManifestError, StateError
from govsync.files import exposed_state, inside
from govsync.project import Selection, SettingValue
from govsync.redact import url as safe_url
from govsync.settings import Settings, resolve
from govsync.state import StateStore
from govsync.state.records import AGENT_CYCLE, AGENT_LEADER
from govsync.statuses import AgentReport, Status

log = logging.getLogger(__name__)

PAUSE = "pause"
# How long a stopping agent waits for its notifications' queues.
FLUSH_SECONDS = 10.0


@dataclass(frozen=True)
class Options:
    """What the command line gives the agent (the project is read at every cycle)."""

    project: str | None = None  # --project; with --repo, relative to the checkout
    repo: str | None = None
    branch: str | None = None
    checkout: str = os.path.join(".govsync", "agent", "checkout")
    interval: float | None = None  # --interval: over every environment's own
    environments: tuple[str, ...] = ()  # --env: only these (none: all)
    endpoint: SettingValue = field(default_factory=lambda: SettingValue(None, "default", "--endpoint", ""))
    state: SettingValue = field(default_factory=lambda: SettingValue(None, "default", "--state", ""))
    workspace: SettingValue = field(default_factory=lambda: SettingValue(None, "default", "--workspace", ""))
    insecure_http: bool = False
    local_seed: str | None = None
    url: str | None = None  # where people reach this agent (links in notifications)
    # Where notifications may go (--allow-sink-host, --github-api): none by default.
    sinks: SinkPolicy = field(default_factory=SinkPolicy)
    # The endpoints an environment may name (--allow-endpoint, normalised): none
    # given, any (the project file's word); given, only these and ``local``.
    endpoints: frozenset[str] = frozenset()

    def endpoint_refused(self, endpoint: str | None) -> str:
        """Why an environment's endpoint is not one this agent may reach ('' : it may)."""
        if not self.endpoints or not endpoint or endpoint.strip() == "local":
            return ""
        normal = normal_endpoint(endpoint)
        if normal in self.endpoints:
            return ""
        return (f"its endpoint {safe_url(normal)} is not one this agent may reach: nothing "
                "was sent to it; its operator allows it with --allow-endpoint "
                f"(or {envvars.AGENT_ENDPOINTS})")


def short_of(exc: OSError) -> str:
    """An OSError (too many open files, no memory for a process...) as a status."""
    return (f"the agent ran short of a system resource: {exc.strerror or type(exc).__name__} "
            "(tried again at the next cycle)")


class Agent:
    """The schedule: rounds of cycles, each environment's when it is due, by the agent
    that leads it (``Leadership``); what each cycle found (``Known``, views.py) and
    what it tells the sinks (``Notifications``)."""

    def __init__(self, options: Options, environ: Mapping[str, str]) -> None:
        self.options = options
        self.environ = environ
        self.metrics = Metrics()
        self.stopping = threading.Event()
        self.woken = threading.Event()
        self.known: dict[str, Known] = {}
        self.problem = ""  # what kept the agent from reading its project
        self.problems: list[str] = []  # each of them, FILE:LINE:COL as validate says it
        self.revision: str | None = None
        self.ready = False
        self.fetched = False  # the checkout brought current in the last round (or none)
        self.started = time.monotonic()
        self.heartbeat = time.monotonic()
        self._lock = threading.RLock()
        self._stores: dict[str, StateStore] = {}
        self.checkout = (Checkout(options.repo, options.branch, options.checkout)
                         if options.repo else None)
        self.leadership = Leadership(self.metrics)
        self.notifications = Notifications(environ, options.sinks, self.metrics,
                                           self._ledger_store, url=options.url)

    # -- control --------------------------------------------------------------------
    def stop(self, signal: str | None = None) -> None:
        """Finish what is in flight, record it, and return from ``run`` (SIGTERM);
        ``signal``: the signal that asked, logged."""
        if signal is not None:
            journal.signalled(signal, again=self.stopping.is_set())
        self.stopping.set()
        self.woken.set()

    def wake(self) -> None:
        """Run every environment's cycle now (a verified push)."""
        self.woken.set()

    @property
    def branch(self) -> str | None:
        return self.checkout.branch if self.checkout is not None else None

    def run(self, *, once: bool = False) -> int:
        """Cycle until stopped (then 0), or one round with ``once``: 0 every environment
        Synced, 2 some not (changes, blocked, locked...), 1 an Error."""
        try:
            self.recall()
            while not self.stopping.is_set():
                woken = self.woken.is_set()
                self.woken.clear()
                self._round(force=woken or once)
                with self._lock:
                    endpoints = [k.target.settings.endpoint for k in self.known.values()
                                 if not self.options.endpoint_refused(
                                     k.target.settings.endpoint)]
                self.ready = readiness.ready(fetched=self.fetched, endpoints=endpoints)
                if once:
                    break
                self._wait()
        finally:
            self.notifications.close(FLUSH_SECONDS)
            self._release()
            for store in self._stores.values():
                try:
                    store.close()
                except StateError as exc:  # its leaderships end with its sessions anyway
                    log.warning("closing the state store: %s", exc)
        if not once:
            return 0  # stopped (SIGTERM): what was in flight is recorded
        statuses = [k.cycle.status for k in self.known.values() if k.cycle is not None]
        if self.problem or Status.ERROR in statuses or not statuses:
            return 1
        return 0 if all(s == Status.SYNCED for s in statuses) else 2

    def recall(self) -> None:
        """Each environment's last recorded status and apply, before the first round
        (the project as the checkout, or the folder, holds it now; nothing fetched)."""
        try:
            targets = self._targets()
        except (GovsyncError, OSError):
            return  # the first round says what is wrong
        for name, target in targets.items():
            found, applied = recall(target, self._store)
            with self._lock:
                known = self.known.setdefault(name, Known(target))
                known.last_apply = applied
            if found is not None:
                self._show(known, found, ran=False)

    def _release(self) -> None:
        """Record that this agent gave its leaderships back (not a take-over, then)."""
        for known in self.known.values():
            store = self._stores.get(known.target.settings.state)
            if known.leading and store is not None:
                self.leadership.release(known.target.workspace, store)

    def _wait(self) -> None:
        with self._lock:
            dues = [k.due for k in self.known.values()]
        wait = (min(dues) if dues else time.monotonic() + self.interval(None)) - time.monotonic()
        self.woken.wait(max(0.0, wait))

    def interval(self, target: Target | None) -> float:
        """An environment's interval: --interval, else its agent.interval, else 5 minutes."""
        if self.options.interval is not None:
            return self.options.interval
        if target is not None and target.agent.interval is not None:
            return target.agent.interval
        return DEFAULT_INTERVAL

    # -- a round --------------------------------------------------------------------
    def _round(self, *, force: bool) -> None:
        self.heartbeat = time.monotonic()
        problem, found = "", []
        self.fetched = self.checkout is None
        try:
            if self.checkout is not None:
                self.revision = self.checkout.update()
                self.fetched = True
            targets = self._targets()
        except ManifestError as exc:
            problem, found = cycles.problems(exc.problems), [str(p) for p in exc.problems]
            targets = {n: k.target for n, k in self.known.items()}
        except GovsyncError as exc:
            problem = str(exc)
            targets = {n: k.target for n, k in self.known.items()}
        except OSError as exc:  # files, processes: a status, never the agent's end
            problem = short_of(exc)
            targets = {n: k.target for n, k in self.known.items()}
        self.problem, self.problems = problem, found or ([problem] if problem else [])
        with self._lock:
            for name in list(self.known):
                if name not in targets:
                    self._forget(name)
            for name, target in targets.items():
                known = self.known.setdefault(name, Known(target))
                # A new round's target, with what the environment's endpoint was found
                # to offer in the rounds before, and the impact reports it measured there
                # (not where a commit moved the environment to another endpoint).
                same = known.target.settings.endpoint == target.settings.endpoint
                known.target = dataclasses.replace(
                    target, offers=known.target.offers,
                    kept=known.target.kept if same else target.kept)
                self.notifications.check(target)
        for name in targets:
            if self.stopping.is_set():
                return
            known = self.known[name]
            if not force and known.due > time.monotonic():
                continue
            try:
                self._environment(known, problem)
            except OSError as exc:
                self._show(known, Cycle(name, known.target.workspace, Status.ERROR,
                                        short_of(exc), self.revision), ran=True)
            known.due = time.monotonic() + self.interval(known.target)
            self.heartbeat = time.monotonic()

    def _project_file(self) -> str | None:
        given = self.options.project
        if self.checkout is None:
            return given
        return os.path.join(self.checkout.directory, given or project.PROJECT_FILE)

    def _targets(self) -> dict[str, Target]:
        """Every environment of the project as it is now (or the one workspace of a
        project without environments, or of no project)."""
        path = self._project_file()
        if path is not None and not os.path.isfile(path):
            raise GovsyncError(f"there is no project file {path}" + (
                f" in {self.checkout.shown} at {self.checkout.branch}"
                if self.checkout is not None else ""))
        root = self.checkout.directory if self.checkout is not None else None
        if path is not None and root is not None and not inside(path, root):
            raise GovsyncError(f"the project file {path} leads outside the agent's checkout "
                               f"{root} (a symbolic link): the agent reads only files of its "
                               "repository; commit the project file itself")
        base = project.select(path, None, [])
        if self.checkout is None:
            folder = os.path.dirname(base.project.file) if base.project else "."
            self.revision = revision_of(folder or ".")
        the_project = base.project
        if the_project is None or not the_project.environments:
            settings = self._settings(base)
            return {settings.workspace: Target(settings.workspace, settings,
                                               the_project.agent(None) if the_project
                                               else agentconfig.AgentSettings(), root)}
        unknown = [e for e in self.options.environments if e not in the_project.environments]
        if unknown:
            the_project.environment(unknown[0])  # ConfigError listing the known ones
        targets = {}
        for name, env in sorted(the_project.environments.items()):
            if self.options.environments and name not in self.options.environments:
                continue
            settings = self._settings(Selection(the_project, env))
            targets[name] = Target(name, settings, the_project.agent(env), root)
        return targets

    def _settings(self, selection: Selection) -> Settings:
        o = self.options
        # Each environment's own key: the variable its apiKey names (one process,
        # every environment).
        return resolve(selection, endpoint=o.endpoint, state=o.state, workspace=o.workspace,
                       environ=self.environ, insecure_http=o.insecure_http,
                       local_seed=o.local_seed)

    def _store(self, settings: Settings) -> StateStore:
        """The agent's own store of a state (it holds the leaderships): kept open."""
        store = self._stores.get(settings.state)
        if store is None:
            store = self._stores[settings.state] = runtime.open_state(settings)
        return store

    def _forget(self, name: str) -> None:
        known = self.known.pop(name)
        self.notifications.forget(name)
        store = self._stores.get(known.target.settings.state)
        if store is not None:
            store.resign(known.target.workspace)

    # -- an environment -------------------------------------------------------------
    def _environment(self, known: Known, problem: str) -> None:
        target = known.target
        workspace = target.workspace
        # A commit could point it at a host of its choosing, or replace its state:
        # neither is touched then.
        refused = (self.options.endpoint_refused(target.settings.endpoint)
                   or exposed_state(target.settings.state, target.root))
        if refused:
            known.leading = False
            self._show(known, Cycle(target.name, workspace, Status.ERROR, refused,
                                    self.revision), ran=True)
            return
        try:
            store = self._store(target.settings)
            known.leading = self._lead(known, store)
            values = store.agent(workspace)
        except StateError as exc:
            known.leading = False
            self._show(known, Cycle(target.name, workspace, Status.ERROR,
                                    f"the state cannot be read: {exc}", self.revision),
                       ran=True)
            return
        known.leader = values.get(AGENT_LEADER)
        known.paused = values.get(PAUSE) if isinstance(values.get(PAUSE), dict) else None
        if not known.leading:
            recorded = values.get(AGENT_CYCLE)
            found = (Cycle.from_record(recorded, target.name, workspace)
                     if isinstance(recorded, dict) else None)
            if found is not None:
                self._show(known, found, ran=False)
            return
        self.notifications.leading(target, values.get(NOTIFICATIONS))
        known.frozen = agentconfig.frozen(target.agent.freeze or (), target.agent.timezone,
                                          datetime.now(UTC))
        if problem:
            result = Cycle(target.name, workspace, Status.ERROR, problem, self.revision)
        else:
            result = cycles.run(target, revision=self.revision, paused=known.paused,
                                frozen=known.frozen, stopping=self.stopping, read=known.reader)
        try:
            store.add_cycle(workspace, result.record())
        except LockLostError as exc:
            log.warning("%s", exc)
            self._resign(known, store)
            return
        except StateError as exc:
            result.reason += f" (this cycle's record was not kept: {exc})"
        self._show(known, result, ran=True)
        self.notifications.cycle_ended(target, store, result)

    def _lead(self, known: Known, store: StateStore) -> bool:
        """Whether this agent leads the environment (still, or now)."""
        workspace = known.target.workspace
        if known.leading and store.leads(workspace):
            return True
        if known.leading:  # lost (its session ended, or another agent took over)
            self._resign(known, store)
        return self.leadership.take(known.target.name, workspace, store)

    def _resign(self, known: Known, store: StateStore) -> None:
        self.leadership.resign(known.target.name, known.target.workspace, store)
        known.leading = False
        self.notifications.resigned(known.target.name)

    def _show(self, known: Known, result: Cycle, *, ran: bool) -> None:
        with self._lock:
            previous, known.cycle = known.cycle, result
            if result.applied is not None:
                known.last_apply = LastApply(result.applied, result.revision)
        journal.cycle_ended(previous, result, ran=ran)
        self.metrics.observe(result, ran=ran)

    def _ledger_store(self, name: str) -> tuple[StateStore, str] | None:
        """Where an environment's notifications' ledger is kept (None: forgotten)."""
        with self._lock:
            known = self.known.get(name)
            if known is None:
                return None
            store = self._stores.get(known.target.settings.state)
            return (store, known.target.workspace) if store is not None else None

    # -- what it shows --------------------------------------------------------------
    def report(self, name: str) -> AgentReport | None:
        """The dashboard's StatusProvider: the agent's word on an environment."""
        with self._lock:
            known = self.known.get(name)
            return known.report() if known is not None else None

    def environments(self) -> list[dict[str, Any]]:
        """``/api/v1/environments``: each environment's status and what stands behind it."""
        with self._lock:
            return [self._environment_json(k) for _, k in sorted(self.known.items())]

    def environment(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            known = self.known.get(name)
            return self._environment_json(known) if known is not None else None

    def _environment_json(self, known: Known) -> dict[str, Any]:
        name = known.target.name
        return known.as_json(revision=self.revision, interval=self.interval(known.target),
                             health=self.notifications.health(name),
                             refused=self.notifications.refused(name))

    def settings_of(self, name: str) -> Settings | None:
        with self._lock:
            known = self.known.get(name)
            return known.target.settings if known is not None else None

    def dashboard_sources(self) -> dict[str, Settings]:
        """What the dashboard reads: each environment's settings, without the endpoint."""
        with self._lock:
            return {n: dataclasses.replace(k.target.settings, endpoint=None)
                    for n, k in sorted(self.known.items())}
