"""Impact reports: a policy's code evaluated over the requests the server was seeded
with (``logs:``, entries ``{id, time, stage, input}``; policy-code.md, contract section
13 "Impact").

CreatePolicyReport stores the report ``running`` (``operations.py``, as any create: its
shape in ``shapes.py`` says it is ``evaluated``) and starts it here, in a thread of its
own: the seeded logs whose time falls in its window (``evaluationStart`` to its
``createdAt``) and that its ``logQuery`` selects are decided by its code at their stage,
with the engine validate and ``govsync test`` use, in one of ``WORKERS`` bounded workers
(code that loops or eats memory stops that worker, never the server).  Requests alike
(the same stage and input) are decided once.  The report is then stored ``completed``,
or ``failed`` for code that does not compile or that the worker had to stop; never
before ``seconds`` (the server's ``report_seconds``) have passed since it was created,
so that a client sees it running for a moment.

What it found is read by the catalog's RESULTS rows, by their response key:

* ``logs`` (ListPolicyImpactReportLogs): the logs on which the code's decision exists
  and is not ``allow``, each ``{id, time, stage, decision, triggeredPolicies: [{id,
  name, status, type}], input: {user, end_user, resource}}`` (``type``: the decision's
  action), oldest first, paged as every List (keyset cursor, ``listMetadata``);
* ``graph`` (GetPolicyImpactReportGraph): the evaluated requests as the service's
  ``core.v1.Graph``: user and resource nodes, an edge from a user to a resource with
  its ``requestCount``, how many the code triggered on and by which action.

A report still running has found nothing yet (an empty page, an empty graph); one that
failed answers 400.  Both take ``query``: terms that must all hold, ``path:value`` (``stage``, ``action``, or
a dotted path into the input: ``user.username:ann``, ``resource.name:orders-db``; a list
holds the value when one of its items is it) or a bare word (found anywhere in the
input, case-insensitively); ``AND`` between terms is allowed, and said already.  A report's ``logQuery`` is read the same way.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from govsync import paths
from govsync.api.catalog import Operation
from govsync.policycode.sandbox import evaluate_staged, validity
from govsync.server.errors import ApiFailure, invalid
from govsync.server.listing import decode_cursor, encode_cursor
from govsync.server.shapes import REPORT_COMPLETED, REPORT_FAILED, REPORT_RUNNING
from govsync.server.store import LOG_KIND, JsonObject, Store, instant

logger = logging.getLogger("govsync.server")

REPORT_KIND = "PolicyReport"
# The bounded workers reports are evaluated in (one a core, at most two), and what one
# report's evaluation may take.
WORKERS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
BUDGET_SECONDS = 120.0
# How long a report is running at least (the server's report_seconds).
MOMENT_SECONDS = 0.2
# The input fields a log entry shows: who and what (never the query, nor the row's data).
SHOWN_INPUT = ("user", "end_user", "resource")


class Logged(NamedTuple):
    """A seeded log entry: its time in ns, its fields, its input as canonical JSON, and
    the request it is (its stage and that JSON: requests alike are decided once)."""

    ns: int
    id: str
    time: str
    stage: str
    key: str
    input: JsonObject
    request: tuple[str, str]


class Decided(NamedTuple):
    """A log the report's code decided on: the decision (None: undefined) and its action."""

    log: Logged
    decision: Any
    action: str | None


Decisions = dict[tuple[str, str], Any]


class Found(NamedTuple):
    """What a report found: every log it evaluated (oldest first) and the decision on each
    distinct request; the logs it triggered on, with their keys in page order; the
    policy it stands for, ``{id, name, status}``."""

    logs: list[Logged]
    decisions: Decisions
    triggered: list[Decided]
    keys: list[tuple[str, str]]
    policy: JsonObject


NOTHING = Found([], {}, [], [], {})


Select = Callable[[Logged, str | None], bool]


def selector(query: str) -> Select:
    """The predicate of a query (the module's docstring): ``(log, action) -> bool``."""
    checks = [_term(term) for term in query.split() if term != "AND"]
    return lambda log, action: all(check(log, action) for check in checks)


def _term(term: str) -> Select:
    field, colon, value = term.partition(":")
    wanted = value.casefold()
    if not colon or not field:
        needle = term.casefold()
        return lambda log, action: needle in log.key.casefold()
    if field == "stage":
        return lambda log, action: log.stage.casefold() == wanted
    if field in ("action", "type"):
        return lambda log, action: (action or "").casefold() == wanted
    keys = paths.split(field.removeprefix("input."))
    return lambda log, action: _holds(paths.get(log.input, keys), wanted)


def _holds(found: Any, wanted: str) -> bool:
    if isinstance(found, list):
        return any(_holds(item, wanted) for item in found)
    if isinstance(found, bool):
        return ("true" if found else "false") == wanted
    return found is not None and not isinstance(found, dict) and str(found).casefold() == wanted


def action_of(decision: Any) -> str | None:
    """A decision's action (None: no decision, or one without an action)."""
    if isinstance(decision, Mapping) and isinstance(decision.get("action"), str):
        return str(decision["action"])
    return None


class Reports:
    """The impact reports of one store: started, evaluated, and what each found."""

    def __init__(self, store: Store, *, seconds: float = MOMENT_SECONDS) -> None:
        self.store = store
        self.seconds = seconds
        self._found: dict[str, Found] = {}
        self._lock = threading.Lock()
        self._logs: tuple[int, list[Logged], list[int]] | None = None
        self._preparing = threading.Lock()
        self._closing = threading.Event()
        self._workers: queue.Queue[str] = queue.Queue()
        for i in range(max(1, WORKERS)):
            self._workers.put(f"report-{i}")
        # The reports this server has started (one stored running by a server before it,
        # stopped meanwhile, is started again when it is read: ``resume``).
        self._started: set[str] = set()

    def start(self, report: JsonObject) -> None:
        """Evaluate a report just stored, in a thread; store its status when it ends."""
        with self._lock:
            self._started.add(report["id"])
        threading.Thread(target=self._run, args=(report, time.monotonic()),
                         name=f"report-{report['id']}", daemon=True).start()

    def resume(self, report: JsonObject) -> None:
        """A report read: started again if it is running and no evaluation of this server
        is under way (the server that began it stopped)."""
        with self._lock:
            known = report.get("id") in self._started
        if report.get("status") == REPORT_RUNNING and not known:
            self.start(report)

    def close(self) -> None:
        self._closing.set()

    def _run(self, report: JsonObject, began: float) -> None:
        """A report's evaluation, in its thread: nothing it meets is raised there (a store
        closed meanwhile, an engine that cannot start: the report fails, or is left)."""
        try:
            found, status = self._evaluate(report), REPORT_COMPLETED
        except _Failed:
            found, status = None, REPORT_FAILED
        except Exception:
            if not self.store.closed:  # else the server stopped: nothing to say
                logger.exception("impact report %s could not be evaluated", report.get("id"))
            found, status = None, REPORT_FAILED
        self._closing.wait(max(0.0, began + self.seconds - time.monotonic()))
        if self._closing.is_set() or self.store.closed:
            return
        with self._lock:
            if found is not None:
                self._found[report["id"]] = found
        current = self.store.get(REPORT_KIND, report["id"])
        if current is None:
            return
        try:
            self.store.put(REPORT_KIND, report["id"], {**current, "status": status})
        except sqlite3.ProgrammingError:  # closed while it was being stored
            return

    # --- evaluating ----------------------------------------------------------------

    def logged(self) -> list[Logged]:
        """The seeded logs, oldest first."""
        return self._logged()[0]

    def _logged(self) -> tuple[list[Logged], list[int]]:
        """The seeded logs, oldest first, and their times (made again when the seed
        changes; by one report while the others wait for it)."""
        with self._preparing:
            version = self.store.version(LOG_KIND)
            cached = self._logs
            if cached is None or cached[0] != version:
                logs = self._prepared()
                cached = self._logs = (version, logs, [log.ns for log in logs])
            return cached[1], cached[2]

    def _prepared(self) -> list[Logged]:
        logs = []
        for entry in self.store.list(LOG_KIND):
            ns = instant(entry.get("time"))
            given = entry.get("input")
            if ns is None or not isinstance(given, dict):
                continue  # the seed checked them: nothing else is stored as a log
            stage = str(entry.get("stage"))
            key = json.dumps(given, sort_keys=True, separators=(",", ":"))
            logs.append(Logged(ns, entry["id"], str(entry["time"]), stage, key, given,
                               (stage, key)))
        logs.sort(key=lambda log: (log.ns, log.id))
        return logs

    def _evaluate(self, report: JsonObject) -> Found:
        """What ``report``'s code decides on each log of its window; _Failed for code that
        does not compile, or that the engine had to stop."""
        code = str(report.get("policyCode") or "")
        if not validity(code).valid:
            raise _Failed()
        start = instant(report.get("evaluationStart")) or 0
        end = instant(report.get("createdAt")) or 0
        query = str(report.get("logQuery") or "")
        every, times = self._logged()
        logs = every[bisect.bisect_left(times, start):bisect.bisect_right(times, end)]
        if query:
            select = selector(query)
            logs = [log for log in logs if select(log, None)]
        distinct = {log.request: log.input for log in logs}
        worker = self._workers.get()
        try:
            evaluations = evaluate_staged(code, [(stage, given) for (stage, _), given
                                                 in distinct.items()],
                                          seconds=BUDGET_SECONDS, worker=worker)
        finally:
            self._workers.put(worker)
        if evaluations and all(e.error and e.error.startswith("the Rego engine was stopped")
                               for e in evaluations):
            raise _Failed()
        decisions = {key: None if e.error else e.decision
                     for key, e in zip(distinct, evaluations, strict=True)}
        actions = {key: action_of(decision) for key, decision in decisions.items()}
        hits = {key for key, action in actions.items() if action is not None and action != "allow"}
        triggered = [Decided(log, decisions[log.request], actions[log.request])
                     for log in logs if log.request in hits]
        policy_id = report.get("policyId")
        stored = self.store.get("Policy", policy_id) if isinstance(policy_id, str) else None
        policy = {"id": policy_id or "", "name": (stored or {}).get("name", ""),
                  "status": (stored or {}).get("status", "")}
        return Found(logs, decisions, triggered, [_key(d) for d in triggered], policy)

    def _found_of(self, report_id: str) -> Found:
        report = self.store.get(REPORT_KIND, report_id)
        if report is None:
            raise ApiFailure(404, f"reportId names no existing {REPORT_KIND}")
        status = report.get("status")
        if status == REPORT_FAILED:
            raise invalid("the report failed: its code does not compile or could not be "
                          "evaluated", "reportId")
        if status != REPORT_COMPLETED:  # still running: nothing found yet
            return NOTHING
        with self._lock:
            found = self._found.get(report_id)
        if found is None:  # evaluated before this server started: evaluated again
            try:
                found = self._evaluate(report)
            except _Failed:
                raise invalid("the report's code could not be evaluated", "reportId") from None
            with self._lock:
                self._found[report_id] = found
        return found

    # --- what a report found -------------------------------------------------------

    def results(self, op: Operation, request: Any) -> JsonObject:
        """The answer of a RESULTS row: the logs page or the graph (by its response key)."""
        answer = _RESULTS[op.response_key or ""]
        return answer(self, request)

    def logs_page(self, request: Any) -> JsonObject:
        found = self._found_of(request.reportId)
        select = selector(request.query)
        rows, keys = found.triggered, found.keys
        if request.query:
            rows = [d for d in rows if select(d.log, d.action)]
            keys = [_key(d) for d in rows]
        fingerprint = hashlib.sha256(json.dumps(
            [request.reportId, request.query]).encode()).hexdigest()[:16]
        after = decode_cursor(request.cursor, fingerprint) if request.cursor else None
        start = bisect.bisect_right(keys, after) if after else 0
        end = min(start + request.limit, len(rows))
        next_cursor = encode_cursor(keys[end - 1], fingerprint) if end < len(rows) else ""
        return {"logs": [_entry(d, found.policy) for d in rows[start:end]],
                "listMetadata": {"after": next_cursor, "before": request.cursor,
                                 "count": len(rows), "nextCursor": next_cursor}}

    def graph(self, request: Any) -> JsonObject:
        found = self._found_of(request.reportId)
        select = selector(request.query)
        nodes: dict[str, JsonObject] = {}
        edges: dict[tuple[str, str], JsonObject] = {}
        actions: dict[tuple[str, str], Counter[str]] = {}
        for log in found.logs:
            decision = found.decisions[log.request]
            d = Decided(log, decision, action_of(decision))
            if not select(log, d.action):
                continue
            user, resource = _user_node(d.log.input), _resource_node(d.log.input)
            nodes.setdefault(user["id"], user)
            nodes.setdefault(resource["id"], resource)
            pair = (user["id"], resource["id"])
            edge = edges.setdefault(pair, {
                "id": f"{pair[0]}->{pair[1]}", "sourceId": pair[0], "targetId": pair[1],
                "requestCount": 0, "triggeredPolicyIds": [], "triggeredPolicyCount": 0,
                "actions": []})
            edge["requestCount"] += 1
            if d.action is not None and d.action != "allow":
                edge["triggeredPolicyCount"] += 1
                actions.setdefault(pair, Counter())[d.action] += 1
                if found.policy["id"] and not edge["triggeredPolicyIds"]:
                    edge["triggeredPolicyIds"] = [found.policy["id"]]
        for pair, counted in actions.items():
            edges[pair]["actions"] = [{"name": name, "count": n}
                                      for name, n in sorted(counted.items())]
        return {"graph": {"nodes": list(nodes.values()), "edges": list(edges.values())}}


_RESULTS: dict[str, Callable[[Reports, Any], JsonObject]] = {
    "logs": Reports.logs_page, "graph": Reports.graph}


class _Failed(Exception):
    """The report's code does not compile, or the engine was stopped evaluating it."""


def _key(d: Decided) -> tuple[str, str]:
    """A triggered log's place in the pages: its time, then its id."""
    return f"{d.log.ns:020d}", d.log.id


def _entry(d: Decided, policy: JsonObject) -> JsonObject:
    shown = {k: d.log.input[k] for k in SHOWN_INPUT if k in d.log.input}
    return {"id": d.log.id, "time": d.log.time, "stage": d.log.stage, "decision": d.decision,
            "triggeredPolicies": [{**policy, "type": d.action}], "input": shown}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _part(given: JsonObject, key: str) -> JsonObject:
    found = given.get(key)
    return found if isinstance(found, dict) else {}


def _user_node(given: JsonObject) -> JsonObject:
    user = _part(given, "user")
    name = _text(user.get("username")) or _text(user.get("email")) or "unknown"
    return {"id": f"user:{name}", "userNode": {"id": name, "name": name,
                                                "type": _text(user.get("type"))}}


def _resource_node(given: JsonObject) -> JsonObject:
    resource = _part(given, "resource")
    key = _text(resource.get("id")) or _text(resource.get("name")) or "unknown"
    return {"id": f"resource:{key}", "resourceNode": {
        "id": key, "name": _text(resource.get("name")) or key,
        "technology": _text(resource.get("technology"))}}
