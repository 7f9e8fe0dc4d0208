"""Impact measured by the endpoint's impact reports (contract section 13, "Impact";
policy-code.md): for every policy a plan creates or whose code it changes, one report of
the new code and, for a changed one, one of the recorded code.

    impacts = await measure(client, targets, window, log_query=None, timeout=120.0)

Every report is created at once (CreatePolicyReport: the code, ``evaluationWindow`` in
seconds, the policy's id where it has one, the log query where one is given), then each
is waited for with GetPolicyReport, polled with a growing pause, until its status is
``completed`` or ``failed`` (any other value: still running) or ``timeout`` passes, and
read page by page with ListPolicyImpactReportLogs (the object layer's one paginator:
a repeated cursor or more pages than the List's count allows stop it); the new code's
report's graph (GetPolicyImpactReportGraph), read beside, says how many logged
requests it evaluated.  The logs are
counted by stage and action (the type of the policy each triggered), each log once
however often a page repeats it, and the first ``EXAMPLES`` kept.

Nothing else is sent: report creations and reads.  Whatever fails (a report that
fails, does not finish, cannot be read; a key refused; an endpoint without impact
reports) makes that policy's impact unknown, saying why, and never raises: an impact
never blocks a plan by itself.  An endpoint that answers 404 does not offer reports:
that is learned once and kept in ``offers`` (the run's, or an agent's per environment),
and the reports not yet asked are not asked.  ``runtime.report_client`` opens the client
with the key reports are created with (GOVSYNC_REPORT_API_KEY where it is set).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from govsync.api.catalog import operation
from govsync.api.client import AsyncClient
from govsync.api.resource import Objects, Offers
from govsync.envvars import REPORT_API_KEY
from govsync.errors import AmbiguousError, ApiError, ForbiddenError, NotFoundError
from govsync.planning.impact import (
    EXAMPLES,
    Counts,
    Example,
    Impact,
    Source,
    Target,
    Window,
    bucket,
)

CREATE = operation("CreatePolicyReport")
GET = operation("GetPolicyReport")
LOGS = operation("ListPolicyImpactReportLogs")
GRAPH = operation("GetPolicyImpactReportGraph")
# A report's status once it is done (any other value: still running).
COMPLETED, FAILED = "completed", "failed"
# The pause between two GetPolicyReport of one report: from FIRST_POLL, growing by
# POLL_GROWTH, never more than MOST_POLL seconds (nor past the deadline).
FIRST_POLL, POLL_GROWTH, MOST_POLL = 0.05, 1.5, 1.0
# Calls in flight at once (a plan changes a few policies, two reports each).
CONCURRENCY = 16
DEFAULT_TIMEOUT = 120.0
NOT_OFFERED = "the endpoint does not offer impact reports"
# The action a log counts under when it names none.
NO_ACTION = "unknown"


class _Unknown(Exception):
    """A report that cannot be measured, and why (in words a reviewer reads)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Measured(NamedTuple):
    """What one report found: counts by stage and action, the first examples, how many
    logs it triggered on, and how many it evaluated (None: not said)."""

    counts: Counts
    examples: tuple[Example, ...]
    triggered: int
    evaluated: int | None = None
    # The times of the logs it triggered on (the plan page's chart: Impact.series).
    times: tuple[str, ...] = ()


async def measure(client: AsyncClient, targets: Sequence[Target], window: Window, *,
                  log_query: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                  offers: Offers | None = None) -> dict[str, Impact]:
    """Each target's impact over ``window`` (address -> Impact, Source.REPORT), its reports
    made concurrently and waited for at most ``timeout`` seconds from now.  ``offers``:
    what the endpoint was found to offer (``reports`` False: nothing is sent)."""
    offers = offers if offers is not None else Offers()
    run = _Run(Objects(client, concurrency=CONCURRENCY, offers=offers), client, window,
               log_query, timeout)
    found = await asyncio.gather(*(run.impact(target) for target in targets))
    return {target.address: impact for target, impact in zip(targets, found, strict=True)}


class _Run:
    """One measure(): its calls, its deadline, what it learns of the endpoint."""

    def __init__(self, objects: Objects, client: AsyncClient, window: Window,
                 log_query: str | None, timeout: float) -> None:
        self.objects = objects
        self.offers = objects.offers
        self.window = window
        self.log_query = log_query
        self.timeout = max(0.0, timeout)
        self.deadline = time.monotonic() + self.timeout
        self.key_variable = client.key_variable

    async def impact(self, target: Target) -> Impact:
        # One report where the recorded code is the new one (its counts are the same).
        codes = [target.code] if target.recorded in (None, target.code) else [
            target.code, target.recorded]
        reports = [asyncio.ensure_future(self.report(code, target.policy_id, first=i == 0))
                   for i, code in enumerate(codes)]
        try:
            measured = [await report for report in reports]
        except _Unknown as exc:
            for report in reports:
                report.cancel()
            await asyncio.gather(*reports, return_exceptions=True)
            return Impact.unknown(self.window.text, Source.REPORT, exc.why)
        new = measured[0]
        was = measured[-1] if target.recorded is not None else None
        return Impact(True, self.window.text, Source.REPORT, new=new.counts,
                      recorded=was.counts if was is not None else None,
                      examples=new.examples, evaluated=new.evaluated,
                      series=bucket(self.window, datetime.now(UTC), new.times,
                                    was.times if was is not None else None))

    async def report(self, code: str, policy_id: str | None, *, first: bool) -> Measured:
        """One report of ``code``: created, waited for, read (``first``: and how many
        logged requests it evaluated, from its graph, read beside its logs)."""
        if self.offers.reports is False:
            raise _Unknown(NOT_OFFERED)
        report_id = await self._create(code, policy_id)
        await self._wait(report_id)
        if not first:
            return await self._read(report_id, policy_id)
        measured, evaluated = await asyncio.gather(self._read(report_id, policy_id),
                                                   self._evaluated(report_id))
        return measured._replace(evaluated=evaluated)

    async def _evaluated(self, report_id: str) -> int | None:
        """How many logged requests the report evaluated: its graph's requests (None where
        the graph cannot say)."""
        try:
            answer = await self.objects.call(GRAPH, {"reportId": report_id})
        except ApiError:
            return None
        graph = answer.get("graph")
        edges = graph.get("edges") if isinstance(graph, Mapping) else None
        if not isinstance(edges, list):
            return None
        total = 0
        for edge in edges:
            n = edge.get("requestCount", 0) if isinstance(edge, Mapping) else None
            if isinstance(n, str) and n.isascii() and n.isdigit():
                n = int(n)  # an int64 in proto3's JSON is its digits, as a string
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                return None
            total += n
        return total

    async def _create(self, code: str, policy_id: str | None) -> str:
        body: dict[str, Any] = {"policyCode": code,
                                "evaluationWindow": self.window.evaluation_window}
        if policy_id is not None:
            body["policyId"] = policy_id
        if self.log_query:
            body["logQuery"] = self.log_query
        try:
            answer = await self.objects.call(CREATE, body)
        except NotFoundError as exc:
            if policy_id is None:  # nothing the request names could be missing
                raise self._not_offered() from None
            raise _Unknown(f"{CREATE.name} answered 404: {exc.message}") from None
        except ForbiddenError:
            raise self._forbidden() from None
        except AmbiguousError as exc:
            raise _Unknown(f"{CREATE.name} was sent but its answer was lost ({exc.message}): "
                           "the report's outcome is unknown") from None
        except ApiError as exc:
            raise _Unknown(f"{CREATE.name} failed: {exc}") from None
        report_id = answer.get("reportId")
        if not isinstance(report_id, str) or not report_id:
            raise _Unknown(f"{CREATE.name} answered without a reportId")
        return report_id

    async def _wait(self, report_id: str) -> None:
        """Until the report is completed (returns) or failed (raises), or the deadline."""
        pause = FIRST_POLL
        while True:
            with self._refused(f"{GET.name} failed"):
                answer = await self.objects.call(GET, {"id": report_id})
            self.offers.reports = True
            report = answer.get("report")
            status = report.get("status") if isinstance(report, Mapping) else None
            if status == COMPLETED:
                return
            if status == FAILED:
                raise _Unknown("the impact report failed: the service could not evaluate "
                               "the code over the logged requests")
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise _Unknown(f"the impact report did not finish within {self.timeout:g} s "
                               f"(its status was still {status!r})")
            await asyncio.sleep(min(pause, left))
            pause = min(pause * POLL_GROWTH, MOST_POLL)

    async def _read(self, report_id: str, policy_id: str | None) -> Measured:
        with self._refused("reading the report's logs stopped"):
            logs = await self.objects.all(LOGS, {"reportId": report_id})
        return count(logs, policy_id)

    @contextlib.contextmanager
    def _refused(self, failed: str) -> Iterator[None]:
        """A report's read that the API refuses as why the impact is unknown: 404, the
        endpoint offers no reports; 403, the key may not; else ``failed: why``."""
        try:
            yield
        except NotFoundError:
            raise self._not_offered() from None
        except ForbiddenError:
            raise self._forbidden() from None
        except ApiError as exc:
            raise _Unknown(f"{failed}: {exc.message}") from None

    def _not_offered(self) -> _Unknown:
        self.offers.reports = False
        return _Unknown(NOT_OFFERED)

    def _forbidden(self) -> _Unknown:
        if self.key_variable == REPORT_API_KEY:
            return _Unknown(f"the key in {REPORT_API_KEY} may not create or read impact "
                            "reports (403): give it the report scope")
        return _Unknown(f"the key read from {self.key_variable} may not create impact "
                        f"reports (403): set {REPORT_API_KEY} to a key scoped to reports")


def count(logs: Sequence[Mapping[str, Any]], policy_id: str | None) -> Measured:
    """Logs of a report counted by stage and action (each log once, by its id), and the
    first EXAMPLES of them.  A log's action is the ``type`` of the policy it triggered
    (``policy_id``'s where it names several), else its decision's action; ``allow`` is
    not an impact."""
    counts: Counts = {}
    examples: list[Example] = []
    times: list[str] = []
    seen: set[str] = set()
    triggered = 0
    for log in logs:
        log_id = log.get("id")
        if isinstance(log_id, str):
            if log_id in seen:
                continue
            seen.add(log_id)
        action = _action(log, policy_id)
        if action == "allow":
            continue
        stage = _text(log.get("stage")) or NO_ACTION
        actions = counts.setdefault(stage, {})
        actions[action] = actions.get(action, 0) + 1
        triggered += 1
        times.append(_text(log.get("time")))
        if len(examples) < EXAMPLES:
            given = log.get("input")
            given = given if isinstance(given, Mapping) else {}
            examples.append(Example(_text(log.get("time")), stage, action,
                                    _user(given), _resource(given)))
    return Measured(counts, tuple(examples), triggered, times=tuple(times))


def _action(log: Mapping[str, Any], policy_id: str | None) -> str:
    policies = [p for p in log.get("triggeredPolicies") or [] if isinstance(p, Mapping)]
    chosen = next((p for p in policies if policy_id and p.get("id") == policy_id),
                  policies[0] if policies else None)
    if chosen is not None and _text(chosen.get("type")):
        return _text(chosen.get("type"))
    decision = log.get("decision")
    if isinstance(decision, Mapping) and _text(decision.get("action")):
        return _text(decision.get("action"))
    return NO_ACTION


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _user(given: Mapping[str, Any]) -> str | None:
    for key in ("user", "end_user"):
        user = given.get(key)
        if isinstance(user, Mapping):
            name = _text(user.get("username")) or _text(user.get("email"))
            if name:
                return name
    return None


def _resource(given: Mapping[str, Any]) -> str | None:
    resource = given.get("resource")
    if isinstance(resource, Mapping):
        return _text(resource.get("name")) or _text(resource.get("id")) or None
    return None
