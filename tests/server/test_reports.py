"""Impact reports of the reference server (contract section 13, "Impact";
policy-code.md): CreatePolicyReport over the logs a seed holds, running then completed
(failed for code that does not compile or does not end), what it found read page by page
and as a graph; a viewer key reads them and cannot create one, a spec-only server has
only the create, faults apply to the create alone."""

from __future__ import annotations

import time
from typing import Any

import pytest
from serverkit import SEED, VIEWER, H, InProcess, make_app, path

from govsync.server import Operations, SeedError, Store, create_app
from govsync.server import reports as server_reports
from reportkit import CODE, LOGS
from testkit import until

DAY = "86400s"


def app_with(logs: list[dict[str, Any]] = LOGS, **kw: Any) -> tuple[Any, Store]:
    return make_app({**SEED, "logs": logs}, **kw)


def post(client: InProcess, op: str, body: dict[str, Any], status: int = 200,
         headers: dict[str, str] = H) -> dict[str, Any]:
    response = client.post(path(op), json=body, headers=headers)
    assert response.status_code == status, (op, response.text)
    answer: dict[str, Any] = response.json()
    return answer


def finished(client: InProcess, report_id: str, headers: dict[str, str] = H) -> dict[str, Any]:
    report: dict[str, Any] = {}

    def done() -> bool:
        report.update(post(client, "GetPolicyReport", {"id": report_id}, headers=headers)["report"])
        return bool(report["status"] != "running")

    until(done, "the report finished", timeout=60)
    return report


def every_log(client: InProcess, report_id: str, limit: int = 2, query: str = ""
              ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor, pages = "", 0
    while True:
        page = post(client, "ListPolicyImpactReportLogs",
                    {"reportId": report_id, "limit": limit, "cursor": cursor, "query": query})
        out += page["logs"]
        pages += 1
        assert pages < 100
        assert page["listMetadata"]["before"] == cursor
        cursor = page["listMetadata"]["nextCursor"]
        if not cursor:
            return out


def test_a_report_runs_then_completes_with_the_logs_its_code_triggers_on() -> None:
    app, _ = app_with(report_seconds=1.0)
    with InProcess(app) as client:
        policy = post(client, "CreatePolicy", {"name": "no-deletes", "code": CODE,
                                               "groupName": "admins", "status": "dry-run"})
        policy_id = policy["policy"]["id"]
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY,
                                                   "policyId": policy_id})
        assert list(made) == ["reportId"]
        first = post(client, "GetPolicyReport", {"id": made["reportId"]})["report"]
        assert first["status"] == "running"
        # What a report still running found: nothing yet.
        assert post(client, "ListPolicyImpactReportLogs",
                    {"reportId": made["reportId"]})["logs"] == []
        report = finished(client, made["reportId"])
        assert report["status"] == "completed"
        assert {k: report[k] for k in ("id", "policyId", "policyCode")} == {
            "id": made["reportId"], "policyId": policy_id, "policyCode": CODE}

        logs = every_log(client, made["reportId"])
    # Within the day, the non-allow decisions only, oldest first.
    assert [entry["id"] for entry in logs] == ["log-006", "log-005", "log-002", "log-001"]
    by_id = {entry["id"]: entry for entry in logs}
    assert by_id["log-001"]["decision"] == {"action": "block", "type": "block_with_formal_message",
                                            "message": "no"}
    assert by_id["log-001"]["triggeredPolicies"] == [
        {"id": policy_id, "name": "no-deletes", "status": "dry-run", "type": "block"}]
    assert by_id["log-005"]["triggeredPolicies"][0]["type"] == "mfa"
    assert by_id["log-002"]["stage"] == "pre_request"
    assert by_id["log-002"]["time"] == LOGS[1]["time"]
    # Who and what: never the query, nor a row's data.
    assert by_id["log-002"]["input"] == {"user": LOGS[1]["input"]["user"],
                                         "resource": LOGS[1]["input"]["resource"]}


def test_the_logs_are_paged_as_every_list_and_a_query_selects() -> None:
    app, _ = app_with(report_seconds=0)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": CODE,
                                                   "evaluationWindow": "604800s"})
        report_id = made["reportId"]
        assert finished(client, report_id)["status"] == "completed"
        whole = post(client, "ListPolicyImpactReportLogs", {"reportId": report_id, "limit": 500})
        assert whole["listMetadata"] == {"after": "", "before": "", "count": 6, "nextCursor": ""}
        for limit in (1, 2, 4, 5):
            assert every_log(client, report_id, limit) == whole["logs"]
        first = post(client, "ListPolicyImpactReportLogs", {"reportId": report_id, "limit": 2})
        assert first["listMetadata"]["count"] == 6 and first["listMetadata"]["nextCursor"]
        # A cursor belongs to its query; one that does not decode is refused.
        error = post(client, "ListPolicyImpactReportLogs",
                     {"reportId": report_id, "cursor": first["listMetadata"]["nextCursor"],
                      "query": "stage:session"}, 400)
        assert error["details"]["fieldViolations"][0]["field"] == "cursor"
        post(client, "ListPolicyImpactReportLogs", {"reportId": report_id, "cursor": "@@"}, 400)

        sessions = every_log(client, report_id, query="stage:session")
        assert [e["id"] for e in sessions] == ["log-009", "log-006", "log-005"]
        anns = every_log(client, report_id, query="user.username:ann action:block")
        assert [e["id"] for e in anns] == ["log-008", "log-001"]
        assert every_log(client, report_id, query="user.username:ann AND action:block") == anns
        assert every_log(client, report_id, query="billing") == [whole["logs"][4]]
        post(client, "ListPolicyImpactReportLogs", {"reportId": "policy-report-none"}, 404)


def test_a_log_query_selects_the_logs_a_report_evaluates_and_the_graph_counts_them() -> None:
    app, _ = app_with(report_seconds=0)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY,
                                                   "logQuery": "resource.name:orders-db"})
        finished(client, made["reportId"])
        assert [e["id"] for e in every_log(client, made["reportId"])] == [
            "log-006", "log-005", "log-001"]
        graph = post(client, "GetPolicyImpactReportGraph", {"reportId": made["reportId"]})
    nodes = {n["id"]: n for n in graph["graph"]["nodes"]}
    assert set(nodes) == {"user:ann", "user:bob", "user:cy", "resource:orders-db"}
    assert nodes["resource:orders-db"]["resourceNode"] == {
        "id": "orders-db", "name": "orders-db", "technology": "postgres"}
    edges = {e["sourceId"]: e for e in graph["graph"]["edges"]}
    # Six logs of the day are of orders-db: ann's 3, bob's 2 (one a session), cy's 1.
    assert sum(e["requestCount"] for e in edges.values()) == 6
    assert (edges["user:ann"]["requestCount"], edges["user:ann"]["triggeredPolicyCount"]) == (3, 2)
    assert edges["user:ann"]["actions"] == [{"name": "block", "count": 1},
                                            {"name": "mfa", "count": 1}]
    assert edges["user:bob"]["triggeredPolicyCount"] == 0 and edges["user:bob"]["actions"] == []


def test_code_that_does_not_compile_fails_and_its_logs_cannot_be_read() -> None:
    app, _ = app_with(report_seconds=0)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": "package formal.v2\nsession := {",
                                                   "evaluationWindow": DAY})
        assert finished(client, made["reportId"])["status"] == "failed"
        error = post(client, "ListPolicyImpactReportLogs", {"reportId": made["reportId"]}, 400)
        assert "failed" in error["message"]
        post(client, "GetPolicyImpactReportGraph", {"reportId": made["reportId"]}, 400)


def test_code_that_does_not_end_fails_within_the_budget_and_the_server_answers_meanwhile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_reports, "BUDGET_SECONDS", 2.0)
    endless = ("package formal.v2\nimport future.keywords.if\n"
               "session := {\"action\": \"block\"} if {\n"
               "    count([x | some x in numbers.range(1, 100000000000); x > 0]) > 0\n}\n")
    app, _ = app_with(report_seconds=0)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": endless,
                                                   "evaluationWindow": DAY})
        began = time.monotonic()
        assert post(client, "ListGroups", {"limit": 1})["groups"]  # not held up
        assert time.monotonic() - began < 2.0
        assert finished(client, made["reportId"])["status"] == "failed"


def test_a_viewer_key_reads_reports_and_cannot_create_one() -> None:
    app, store = app_with(report_seconds=0)
    viewer = {"X-API-KEY": VIEWER}
    with InProcess(app) as client:
        error = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY},
                     403, headers=viewer)
        assert error["code"] == "forbidden"
        assert store.list("PolicyReport") == []
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY})
        assert finished(client, made["reportId"], headers=viewer)["status"] == "completed"
        logs = post(client, "ListPolicyImpactReportLogs", {"reportId": made["reportId"]},
                    headers=viewer)
        assert len(logs["logs"]) == 4
        post(client, "GetPolicyImpactReportGraph", {"reportId": made["reportId"]},
             headers=viewer)


def test_a_spec_only_server_creates_reports_and_answers_the_rest_404() -> None:
    app, store = app_with(operations=Operations.SPEC, report_seconds=0)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY})
        for op, body in (("GetPolicyReport", {"id": made["reportId"]}),
                         ("ListPolicyImpactReportLogs", {"reportId": made["reportId"]}),
                         ("GetPolicyImpactReportGraph", {"reportId": made["reportId"]})):
            assert post(client, op, body, 404)["code"] == "not_found"
    assert len(store.list("PolicyReport")) == 1


class _Always:
    """An rng whose every draw is 0: every write faults, and as a 500."""

    def random(self) -> float:
        return 0.0


def test_the_fault_rate_applies_to_creating_a_report_not_to_reading_one() -> None:
    app, store = app_with(report_seconds=0)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY})
        finished(client, made["reportId"])
    faulty = app.state.server
    faulty.fault_rate, faulty.rng = 1.0, _Always()
    with InProcess(app) as client:
        error = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY},
                     500)
        assert "nothing was stored" in error["message"]
        assert len(store.list("PolicyReport")) == 1
        assert post(client, "GetPolicyReport", {"id": made["reportId"]})["report"]["status"] \
            == "completed"
        assert len(post(client, "ListPolicyImpactReportLogs",
                        {"reportId": made["reportId"]})["logs"]) == 4


def test_latency_applies_to_the_report_reads() -> None:
    app, _ = app_with(report_seconds=0, latency_ms=300)
    with InProcess(app) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY})
        began = time.monotonic()
        post(client, "GetPolicyImpactReportGraph", {"reportId": made["reportId"]})
        assert time.monotonic() - began >= 0.3


def test_a_report_names_a_policy_that_exists_or_none() -> None:
    app, _ = app_with(report_seconds=0)
    with InProcess(app) as client:
        error = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY,
                                                    "policyId": "policy-none"}, 404)
        assert "policyId" in error["message"]
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY})
        report = finished(client, made["reportId"])
        assert "policyId" not in report or report["policyId"] == ""
        first = every_log(client, made["reportId"])[0]
        assert first["triggeredPolicies"] == [{"id": "", "name": "", "status": "",
                                               "type": "mfa"}]


@pytest.mark.parametrize(("entry", "said"), [
    ({"id": "l", "time": "yesterday", "stage": "session", "input": {}}, "RFC 3339"),
    ({"id": "l", "time": "2026-02-30T00:00:00Z", "stage": "session", "input": {}}, "RFC 3339"),
    ({"id": "l", "time": "2026-01-01T00:00:00Z", "stage": "login", "input": {}}, "stage"),
    ({"id": "l", "time": "2026-01-01T00:00:00Z", "stage": "session", "input": []}, "input"),
    ({"time": "2026-01-01T00:00:00Z", "stage": "session", "input": {}}, "string id"),
])
def test_a_seeded_log_is_checked(entry: dict[str, Any], said: str) -> None:
    with pytest.raises(SeedError, match=rf"logs\[1\]: .*{said}"):
        Store().load_seed({"logs": [LOGS[0], entry]})


def test_seeded_log_times_may_carry_an_offset() -> None:
    store = Store()
    store.load_seed({"logs": [{**LOGS[0], "time": "2026-01-01T01:00:00.5+01:00"}]})
    reports = server_reports.Reports(store)
    assert reports.logged()[0].ns == 1767225600_500_000_000


def test_a_report_left_running_by_a_stopped_server_completes_once_read(tmp_path: Any) -> None:
    db = str(tmp_path / "api.db")
    store = Store(db)
    store.load_seed({**SEED, "logs": LOGS})
    first = create_app(store, api_keys=["k"], report_seconds=3600)
    with InProcess(first) as client:
        made = post(client, "CreatePolicyReport", {"policyCode": CODE, "evaluationWindow": DAY},
                    headers={"X-API-KEY": "k"})
    store.close()  # stopped while the report runs: it stays running, nothing is raised
    again = Store(db)
    assert again.get("PolicyReport", made["reportId"])["status"] == "running"
    with InProcess(create_app(again, api_keys=["k"], report_seconds=0)) as client:
        report = finished(client, made["reportId"], headers={"X-API-KEY": "k"})
        assert report["status"] == "completed"
        logs = post(client, "ListPolicyImpactReportLogs", {"reportId": made["reportId"]},
                    headers={"X-API-KEY": "k"})["logs"]
    assert len(logs) == 4
    again.close()
