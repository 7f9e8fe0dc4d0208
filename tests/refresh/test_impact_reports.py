"""Impact measured by impact reports (contract section 13, "Impact"): ``refresh.impact.
measure`` against the real reference server, in process, and against one that misbehaves:
counts of the new and the recorded code, examples, a report that never finishes, a
cursor that loops, a page answered twice, an endpoint without reports, a key refused.
Whatever fails is an unknown impact saying why; nothing but report creations and reads
is sent."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from faultkit import read_body
from govsync import envvars, runtime
from govsync.api.client import LOCAL_BASE_URL, AsyncClient, RetryPolicy
from govsync.api.resource import Offers
from govsync.api.transport import open_transport
from govsync.planning.impact import EXAMPLES, Impact, Source, Target, parse_window
from govsync.refresh.impact import NOT_OFFERED, measure
from govsync.server import Operations, Store, create_app
from govsync.server.store import timestamp
from govsync.settings import Settings
from reportkit import CODE, LOGS, log
from testkit import serve, stop

KEY, VIEWER = "impact-key", "impact-viewer"
WEEK = parse_window("7d")
# The recorded code: blocks every DELETE and SELECT of bob; no session rule.
RECORDED = """package formal.v2
import future.keywords.if

default pre_request := {"action": "allow"}
pre_request := {"action": "block"} if { input.user.username == "bob" }
"""
POLICY = "Policy/no-deletes"

App = Callable[..., Awaitable[None]]


def server(logs: list[dict[str, Any]] = LOGS, **kw: Any) -> tuple[Any, Store]:
    store = Store()
    store.load_seed({"logs": logs})
    kw.setdefault("report_seconds", 0)
    return create_app(store, api_keys=[KEY], viewer_keys=[VIEWER], **kw), store


class Recorder:
    """An ASGI app in front of another: every operation called with its request, a rewrite
    of chosen operations' requests (``ask[name](request) -> request``) and answers
    (``rewrite[name](request, answer) -> answer``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls: Counter[str] = Counter()
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.ask: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
        self.rewrite: dict[str, Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        name = scope["path"].rsplit("/", 1)[-1]
        self.calls[name] += 1
        body = await read_body(receive)
        request = json.loads(body)
        self.sent.append((name, request))
        if name in self.ask:
            body = json.dumps(self.ask[name](request)).encode()
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"]
                                          if k.lower() != b"content-length"]}
        rewrite = self.rewrite.get(name)
        kept: list[dict[str, Any]] = []

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def keep(message: dict[str, Any]) -> None:
            kept.append(message)

        await self.app(scope, replay, keep if rewrite is not None else send)
        if rewrite is None:
            return
        answer = json.loads(b"".join(m.get("body", b"") for m in kept
                                     if m["type"] == "http.response.body"))
        out = json.dumps(rewrite(request, answer)).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(out)).encode())]})
        await send({"type": "http.response.body", "body": out})


def no_cursor(request: dict[str, Any]) -> dict[str, Any]:
    """A request as the server takes it: the cursors the rewrites made up left out."""
    return {k: v for k, v in request.items() if k != "cursor"}


def client_of(app: Any, key: str = KEY,
              key_variable: str = envvars.API_KEY) -> AsyncClient:
    return AsyncClient(LOCAL_BASE_URL, key,
                       transport=open_transport(LOCAL_BASE_URL, app=app),
                       retry=RetryPolicy(max_retries=1, backoff=0.01),
                       key_variable=key_variable)


def run_measure(app: Any, targets: list[Target], *, key: str = KEY,
                key_variable: str = envvars.API_KEY, **kw: Any) -> dict[str, Impact]:
    async def main() -> dict[str, Impact]:
        async with client_of(app, key, key_variable) as client:
            return await measure(client, targets, WEEK, **kw)

    return asyncio.run(main())


def changed(address: str = POLICY, policy_id: str | None = None) -> Target:
    return Target(address, policy_id, CODE, RECORDED)


def test_new_and_recorded_code_are_counted_by_stage_and_action_with_examples() -> None:
    app, store = server()
    recorder = Recorder(app)
    created = Target("Policy/new-one", None, CODE, None)
    impacts = run_measure(recorder, [changed(), created], timeout=60)
    impact = impacts[POLICY]
    assert impact.known and impact.why == "" and impact.source is Source.REPORT
    assert impact.window == "7d"
    # Within the week: the three DELETEs blocked, the three admin sessions asked for MFA.
    assert impact.new == {"pre_request": {"block": 3}, "session": {"mfa": 3}}
    # The recorded code blocks bob's two requests and decides no session.
    assert impact.recorded == {"pre_request": {"block": 2}}
    assert impact.evaluated == len(LOGS)
    assert len(impact.examples) == min(EXAMPLES, 6)
    first = impact.examples[0]
    assert (first.time, first.stage, first.decision, first.user, first.resource) == (
        LOGS[8]["time"], "session", "mfa", "ann", "orders-db")
    assert impacts["Policy/new-one"].known and impacts["Policy/new-one"].recorded is None
    assert impacts["Policy/new-one"].new == impact.new
    # Three reports, each created once; nothing sent but creations and reads.
    assert recorder.calls["CreatePolicyReport"] == 3
    assert {name for name in recorder.calls} <= {
        "CreatePolicyReport", "GetPolicyReport", "ListPolicyImpactReportLogs",
        "GetPolicyImpactReportGraph"}
    sent = [(r["policyCode"], r["evaluationWindow"], r.get("policyId"))
            for name, r in recorder.sent if name == "CreatePolicyReport"]
    assert sorted(sent) == sorted([(CODE, "604800s", None), (RECORDED, "604800s", None),
                                   (CODE, "604800s", None)])
    assert len(store.list("PolicyReport")) == 3


def test_a_policy_id_and_a_log_query_are_sent() -> None:
    app, store = server()
    with_policy = {}

    async def main() -> dict[str, Impact]:
        async with client_of(app) as client:
            policy = await client.call("CreatePolicy", {"name": "no-deletes", "code": CODE,
                                                        "userEmail": "ann@example.com"})
            with_policy["id"] = policy["policy"]["id"]
            return await measure(client, [changed(policy_id=with_policy["id"])], WEEK,
                                 log_query="user.username:ann", timeout=60)

    store.load_seed({"users": [{"id": "usr-ann", "human": {"email": "ann@example.com"}}]})
    impact = asyncio.run(main())[POLICY]
    assert impact.new == {"pre_request": {"block": 2}, "session": {"mfa": 2}}
    assert impact.recorded == {}
    assert {(r.get("policyId"), r.get("logQuery")) for r in store.list("PolicyReport")} == {
        (with_policy["id"], "user.username:ann")}


def test_a_report_that_never_finishes_is_unknown_once_the_timeout_passes() -> None:
    app, _ = server(report_seconds=3600)
    began = time.monotonic()
    impact = run_measure(app, [changed()], timeout=1.0)[POLICY]
    assert time.monotonic() - began < 10
    assert not impact.known and impact.new is None
    assert impact.why == "the impact report did not finish within 1 s (its status was still " \
                         "'running')"


def test_a_status_the_client_does_not_know_is_still_running() -> None:
    app, _ = server()
    recorder = Recorder(app)
    recorder.rewrite["GetPolicyReport"] = lambda request, answer: {
        "report": {**answer["report"], "status": "REPORT_STATUS_QUEUED"}}
    impact = run_measure(recorder, [changed()], timeout=0.5)[POLICY]
    assert not impact.known and "still 'REPORT_STATUS_QUEUED'" in impact.why


def test_a_failed_report_is_unknown() -> None:
    app, _ = server()
    target = Target(POLICY, None, "package formal.v2\nsession := {", RECORDED)
    impact = run_measure(app, [target], timeout=60)[POLICY]
    assert not impact.known and "the impact report failed" in impact.why


def test_a_cursor_that_loops_or_a_page_answered_twice_is_bounded() -> None:
    app, _ = server()
    looping = Recorder(app)
    looping.ask["ListPolicyImpactReportLogs"] = no_cursor
    looping.rewrite["ListPolicyImpactReportLogs"] = lambda request, answer: {
        **answer, "listMetadata": {**answer["listMetadata"], "nextCursor": "again",
                                   "count": 10**6}}
    began = time.monotonic()
    impact = run_measure(looping, [changed()], timeout=60)[POLICY]
    assert time.monotonic() - began < 30
    assert not impact.known
    assert impact.why == "reading the report's logs stopped: ListPolicyImpactReportLogs " \
                         "repeated a page cursor; paging stopped"

    twice = Recorder(app)
    twice.ask["ListPolicyImpactReportLogs"] = no_cursor
    pages: dict[str, int] = {}

    def repeat(request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        # Every page answered twice: the same logs under a new cursor, then the rest.
        n = pages[request["reportId"]] = pages.get(request["reportId"], 0) + 1
        if n == 1:
            return {**answer, "listMetadata": {**answer["listMetadata"], "nextCursor": "dup"}}
        return answer

    twice.rewrite["ListPolicyImpactReportLogs"] = repeat
    impact = run_measure(twice, [changed()], timeout=60)[POLICY]
    assert impact.known
    assert impact.new == {"pre_request": {"block": 3}, "session": {"mfa": 3}}


def test_a_page_loop_is_stopped_by_the_count_it_announces() -> None:
    app, _ = server()
    endless = Recorder(app)
    endless.ask["ListPolicyImpactReportLogs"] = no_cursor
    served = Counter[str]()

    def more(request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        served[request["reportId"]] += 1
        return {**answer, "listMetadata": {**answer["listMetadata"], "count": 6,
                                           "nextCursor": f"c{served[request['reportId']]}"}}

    endless.rewrite["ListPolicyImpactReportLogs"] = more
    impact = run_measure(endless, [changed()], timeout=60)[POLICY]
    assert not impact.known and "gave more pages than its count (6) allows" in impact.why
    assert max(served.values()) <= 3


def test_an_endpoint_without_reports_is_learned_once() -> None:
    app, _ = server(operations=Operations.SPEC)
    recorder = Recorder(app)
    offers = Offers()
    impacts = run_measure(recorder, [changed("Policy/a"), changed("Policy/b")], timeout=60,
                          offers=offers)
    assert {a: (i.known, i.why) for a, i in impacts.items()} == {
        "Policy/a": (False, NOT_OFFERED), "Policy/b": (False, NOT_OFFERED)}
    assert offers.reports is False
    asked = sum(recorder.calls.values())
    again = run_measure(recorder, [changed("Policy/c")], timeout=60, offers=offers)
    assert again["Policy/c"].why == NOT_OFFERED
    assert sum(recorder.calls.values()) == asked  # nothing sent once learned


def test_a_key_refused_names_the_variable_to_set() -> None:
    app, store = server()
    impact = run_measure(app, [changed()], key=VIEWER, timeout=60)[POLICY]
    assert not impact.known
    assert impact.why == ("the key read from GOVSYNC_API_KEY may not create impact reports "
                          "(403): set GOVSYNC_REPORT_API_KEY to a key scoped to reports")
    assert VIEWER not in impact.why and store.list("PolicyReport") == []
    from_report_key = run_measure(app, [changed()], key=VIEWER,
                                  key_variable=envvars.REPORT_API_KEY, timeout=60)[POLICY]
    assert "the key in GOVSYNC_REPORT_API_KEY may not" in from_report_key.why


def test_a_lost_create_is_unknown_and_never_sent_twice() -> None:
    app, store = server()
    app.state.server.fault_rate = 1.0

    class Drop:
        values = iter([0.0, 0.9])  # a fault, of the dropping kind

        def random(self) -> float:
            return next(self.values, 1.0)

    app.state.server.rng = Drop()
    impact = run_measure(app, [Target(POLICY, None, CODE, None)], timeout=60)[POLICY]
    assert not impact.known and "its answer was lost" in impact.why
    assert len(store.list("PolicyReport")) == 1


def test_the_report_client_uses_the_report_key_where_it_is_set(tmp_path: Path) -> None:
    proc, url = serve(["--api-key", "apply-key-0123", "--api-key", "report-key-0123",
                       "--viewer-key", "viewer-key-0123"], key="apply-key-0123")
    try:
        def impact(environ: dict[str, str]) -> Impact:
            settings = Settings(endpoint=url, api_key="viewer-key-0123", environ=environ)

            async def main() -> Impact:
                async with runtime.report_client(settings) as client:
                    return (await measure(client, [Target(POLICY, None, CODE, None)], WEEK,
                                          timeout=60))[POLICY]

            return asyncio.run(main())

        refused = impact({})
        assert "GOVSYNC_REPORT_API_KEY" in refused.why and "viewer-key" not in refused.why
        measured = impact({envvars.REPORT_API_KEY: "report-key-0123"})
        assert measured.known and measured.new == {}  # the served server has no logs
    finally:
        stop(proc)


def test_logs_outside_the_window_are_not_counted() -> None:
    logs = [log(1, 1, "session", "ann", admin=True),
            {**log(2, 0, "session", "ann", admin=True),
             "time": timestamp(time.time_ns() - 8 * 24 * 3_600_000_000_000)}]
    app, _ = server(logs)
    impact = run_measure(app, [Target(POLICY, None, CODE, None)], timeout=60)[POLICY]
    assert impact.new == {"session": {"mfa": 1}} and impact.evaluated == 1


@pytest.mark.parametrize("status", [401, 500])
def test_any_other_failure_is_unknown_with_why(status: int) -> None:
    app, _ = server()
    if status == 401:
        impact = run_measure(app, [changed()], key="wrong-key-0123", timeout=60)[POLICY]
        assert "wrong-key" not in impact.why
    else:
        app.state.server.fault_rate = 1.0
        app.state.server.rng = type("Err", (), {"random": lambda self: 0.0})()
        impact = run_measure(app, [changed()], timeout=60)[POLICY]
    assert not impact.known and impact.why.startswith("CreatePolicyReport failed:")
    assert str(status) in impact.why


def test_unchanged_code_is_one_report() -> None:
    app, store = server()
    impact = run_measure(app, [Target(POLICY, None, CODE, CODE)], timeout=60)[POLICY]
    assert impact.known and impact.recorded == impact.new
    assert impact.new == {"pre_request": {"block": 3}, "session": {"mfa": 3}}
    assert len(store.list("PolicyReport")) == 1
