"""The CI templates' plan jobs measure impact where govsync.yaml asks (issue 45): run
as the CIs run them (test_ci_steps.py's jobs), in a repository ``govsync init`` made,
with prod's ``impact:`` naming a window and a file of recorded inputs and staging's a
window only.  Without GOVSYNC_REPORT_API_KEY, prod is planned with ``--impact-from``
its file and staging says why its impact is unknown; with it, the job holds the report
key beside the viewer key (never the apply key) and govsync asks the endpoint first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_ci_steps import CI, VIEWER, GitHubJob, GitLabJob, initialised, ok
from workflowkit import KEY

pytestmark = pytest.mark.slow

REPORT_KEY = "ci-impact-report-key-77c1"
# A week of recorded inputs: writes without a ticket (blocked by the template's
# Policy/writes-need-ticket), reads (allowed), and one broken line.
RECORDS = "".join(
    json.dumps({"time": f"2026-11-2{day}T10:00:00Z", "stage": "pre_request",
                "input": {"query": {"statement_type": kind},
                          "hooks": {"ticket_check": {"approved": False}}}}) + "\n"
    for day in range(1, 8) for kind in ("DELETE", "SELECT", "UPDATE")) + "{broken\n"


@pytest.fixture
def ci(tmp_path: Path) -> Iterator[CI]:
    repo, servers = initialised(tmp_path)
    project = (repo / "govsync.yaml").read_text()
    project = project.replace(
        "  staging:\n    paths: [manifests/]",
        f"  staging:\n    paths: [manifests/]\n    endpoint: {servers['staging'].url}\n"
        "    impact: {window: 7d}")
    project = project.replace(
        "  prod:\n    paths: [manifests/]",
        f"  prod:\n    paths: [manifests/]\n    endpoint: {servers['prod'].url}\n"
        "    impact: {window: 3650d, from: logs/recorded.jsonl}")
    (repo / "govsync.yaml").write_text(project)
    (repo / "logs").mkdir()
    (repo / "logs" / "recorded.jsonl").write_text(RECORDS)
    try:
        state = str(tmp_path / "shared-state.db")
        yield CI(tmp_path, repo, servers, state, state, None)
    finally:
        for server in servers.values():
            server.stop()


def impact_of(markdown: str) -> str:
    start = markdown.index("#### Impact over logged traffic")
    end = markdown.find("<details><summary><b>", start)
    return markdown[start:end]


def github(ci: CI, job: str, settings: dict[str, str],
           matrix: dict[str, str] | None = None) -> GitHubJob:
    workflow = yaml.safe_load((ci.repo / ".github/workflows/govsync.yml").read_text())
    return GitHubJob(ci, workflow, job, settings, matrix)


def planned(plan: GitHubJob) -> str:
    """The plan job's steps run: its output (the plans are in plans/)."""
    ok(plan.step("Install govsync"))
    out = ok(plan.step("Plan every environment"))
    assert plan.outputs()["status"] == "0", out
    return out


def test_github_plan_job_replays_the_file_without_the_report_key(ci: CI) -> None:
    plan = github(ci, "plan", {**ci.shared, **ci.production})
    assert plan.env["GOVSYNC_REPORT_API_KEY"] == ""  # the secret is optional
    planned(plan)
    whole = (ci.repo / "plans" / "prod.md").read_text()
    prod = impact_of(whole)
    assert "`Policy/writes-need-ticket` (created): 14 request(s) (new policy)" in prod
    assert "by recorded inputs replayed locally (--impact-from), over 21 logged" in prod
    assert "(line 22)" in prod  # the broken line, named; the rest counted
    # The job asked for the file itself: no report was tried with the viewer key.
    assert "asked by --impact-from" in whole and "Note: reports" not in prod
    # staging names no file: its plan says why its impact is unknown (a viewer key may
    # not create reports, or the endpoint does not offer them), and is made all the same.
    staging = impact_of((ci.repo / "plans" / "staging.md").read_text())
    assert "| `Policy/writes-need-ticket` | 7d | **unknown**: " in staging, staging
    assert json.loads((ci.repo / "plans" / "staging.json").read_text())["changes"]


def test_github_plan_job_holds_the_report_key_and_never_the_apply_key(ci: CI) -> None:
    settings = {**ci.shared, **ci.production, "GOVSYNC_REPORT_API_KEY": REPORT_KEY}
    plan = github(ci, "plan", settings)
    assert plan.env["GOVSYNC_REPORT_API_KEY"] == REPORT_KEY
    assert plan.env["GOVSYNC_API_KEY"] == VIEWER and KEY not in json.dumps(plan.env)
    for job in ("apply", "drift", "environments"):
        other = github(ci, job, settings, {"env": "prod"})
        assert "GOVSYNC_REPORT_API_KEY" not in other.env, job
    out = planned(plan)
    # The reports are asked first (with the report key); where the endpoint cannot
    # give them, prod's own file is replayed instead, and the plan says so.
    whole = (ci.repo / "plans" / "prod.md").read_text()
    prod = impact_of(whole)
    assert "14 request(s) (new policy)" in prod
    assert "asked by the project's impact settings" in whole
    assert "> Note: reports: " in prod and "replayed logs/recorded.jsonl instead" in prod
    assert REPORT_KEY not in out and REPORT_KEY not in prod


def test_gitlab_plan_job_replays_the_file_without_the_report_key(ci: CI) -> None:
    pipeline = yaml.safe_load((ci.repo / ".gitlab-ci.yml").read_text())
    job = GitLabJob(ci, pipeline, "plan", {**ci.shared})
    out = ok(job.run(CI_COMMIT_SHORT_SHA="c0ffee1"))
    prod = impact_of((ci.repo / "plans" / "prod.md").read_text())
    assert "`Policy/writes-need-ticket` (created): 14 request(s) (new policy)" in prod, out
    assert "asked by --impact-from" in (ci.repo / "plans" / "prod.md").read_text()
    staging = impact_of((ci.repo / "plans" / "staging.md").read_text())
    assert "**unknown**: " in staging
