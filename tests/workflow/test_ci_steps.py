"""The CI templates' shell steps, run here as the CI runs them.

Every `run:` step of the GitHub workflow's jobs and every script of the
GitLab pipeline's jobs, read from the templates that ``govsync init`` writes,
runs with bash (``-eo pipefail``, as both CIs do) in a scaffolded repository
against the reference server, with the variables each job gets: the
pull-request jobs only the viewer key (the server refuses it every write) and
the read-only state, the apply job the key that writes. ``pip`` is a stub
that records what it was asked to install (installing for real is
test_packaging's business); the GitLab API is a stub server that knows one
merged merge request.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from workflowkit import KEY, Server

from govsync.cli import cli
from govsync.init import INSTALL_SPEC_ENV, REQUIREMENTS

pytestmark = pytest.mark.slow

VIEWER = "ci-steps-viewer-key"
GITLAB_TOKEN = "ci-steps-gitlab-token"
SPEC = "govsync[postgres] @ git+https://git.example.com/govsync.git@" + "ab" * 20
SECRETS = {"GOVSYNC_LOGSTORE_API_KEY": "ci-logstore-0f3e", "GOVSYNC_AI_PROVIDER_API_KEY": "ci-ai-9a1b"}
EXPRESSION = re.compile(r"\$\{\{\s*(vars|secrets)\.(\w+)\s*\}\}")
STUB_PIP = """#!/bin/sh
# The CI's pip: records its arguments; `-r FILE` must name a file.
echo "$*" >> "$PIP_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = -r ]; then test -f "$2" || { echo "pip: no such file: $2" >&2; exit 1; }; fi
  shift
done
"""


class CI:
    """A checkout of the scaffolded repository and the values CI gives its jobs."""

    def __init__(self, tmp_path: Path, repo: Path, server: Server) -> None:
        self.repo = repo
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "pip").write_text(STUB_PIP)
        (self.bin / "pip").chmod(0o755)
        self.pip_log = tmp_path / "pip.log"
        self.files = tmp_path / "runner"
        self.files.mkdir()
        state = str(tmp_path / "shared-state.db")  # outside the checkout, as in CI
        # What the settings hold: repository-wide read-only values, and the
        # production environment's (apply, drift).
        self.shared = {"GOVSYNC_ENDPOINT": server.url, "GOVSYNC_STATE_READONLY": state,
                       "GOVSYNC_VIEWER_API_KEY": VIEWER, **SECRETS}
        self.production = {"GOVSYNC_STATE": state, "GOVSYNC_API_KEY": KEY}

    def bash(self, script: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        base = {"PATH": f"{self.bin}:{Path(sys.executable).parent}:/usr/bin:/bin",
                "HOME": str(self.files), "PIP_LOG": str(self.pip_log), "NO_COLOR": "1"}
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                              cwd=self.repo, env={**base, **env}, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)


def ok(proc: subprocess.CompletedProcess[str], code: int = 0) -> str:
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.fixture
def ci(tmp_path: Path) -> Iterator[CI]:
    repo = tmp_path / "repo"
    for which in ("github", "gitlab"):
        result = CliRunner().invoke(cli, ["init", str(repo), "--ci", which, "--force"],
                                    env={INSTALL_SPEC_ENV: SPEC})
        assert result.exit_code == 0, result.output
    server = Server(tmp_path, "api", flags=["--viewer-key", VIEWER], seed=repo / "local-seed.yaml")
    server.start()
    try:
        yield CI(tmp_path, repo, server)
    finally:
        server.stop()


def tune_hook(repo: Path, old: str, new: str) -> None:
    path = repo / "manifests" / "hooks-and-policies.yaml"
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


# -- GitHub Actions -----------------------------------------------------------------


class GitHubJob:
    def __init__(self, ci: CI, workflow: dict[str, Any], name: str,
                 settings: Mapping[str, str]) -> None:
        self.ci = ci
        self.job = workflow["jobs"][name]
        self.output = ci.files / f"{name}.output"
        self.summary = ci.files / f"{name}.summary"
        self.env = {"GITHUB_OUTPUT": str(self.output), "GITHUB_STEP_SUMMARY": str(self.summary)}
        for key, value in {**workflow["env"], **self.job.get("env", {})}.items():
            self.env[key] = EXPRESSION.sub(lambda m: settings.get(m.group(2), ""), str(value))
            assert "${{" not in self.env[key], (key, value)

    def step(self, name: str, **env: str) -> subprocess.CompletedProcess[str]:
        [step] = [s for s in self.job["steps"] if s.get("name") == name]
        return self.ci.bash(step["run"], {**self.env, **step.get("env", {}), **env})

    def outputs(self) -> dict[str, str]:
        lines = self.output.read_text().splitlines() if self.output.exists() else []
        return dict(line.split("=", 1) for line in lines)


def test_github_jobs(ci: CI) -> None:
    workflow = yaml.safe_load((ci.repo / ".github/workflows/govsync.yml").read_text())
    shared, production = ci.shared, ci.production

    # Pull request: a job without its settings says which ones it misses.
    unset = GitHubJob(ci, workflow, "plan", {})
    out = ok(unset.step("Check the settings"), 1)
    for name in ("GOVSYNC_ENDPOINT", "GOVSYNC_STATE_READONLY", "GOVSYNC_VIEWER_API_KEY"):
        assert f"::error::variable {name}" in out or f"::error::secret {name}" in out, out

    plan = GitHubJob(ci, workflow, "plan", {**shared, **production})
    assert plan.env["GOVSYNC_API_KEY"] == VIEWER  # never the key that writes
    assert plan.env["GOVSYNC_STATE"] == shared["GOVSYNC_STATE_READONLY"]
    assert KEY not in json.dumps(plan.env)
    ok(plan.step("Install govsync"))
    assert ci.pip_log.read_text() == f"install -r {REQUIREMENTS}\n"
    ok(plan.step("Check the settings"))
    assert "valid." in ok(plan.step("Validate"))
    out = ok(plan.step("Plan"))
    assert plan.outputs()["status"] == "0", out
    comment = (ci.repo / "plan.md").read_text()
    assert "| create | update |" in comment and "(create)" in comment, comment[:500]
    assert (ci.repo / "plan.json").is_file() and plan.summary.read_text() == comment
    failed = ok(plan.step("Fail on a blocked change or an error", STATUS="1"), 1)
    assert "::error::govsync plan exited with 1" in failed
    saved = ci.files / "artifact-plan.json"
    shutil.move(ci.repo / "plan.json", saved)

    # Merge: apply downloads the saved plan and applies it.
    apply = GitHubJob(ci, workflow, "apply", {**shared, **production})
    assert apply.env["GOVSYNC_API_KEY"] == KEY
    ok(apply.step("Install govsync"))
    ok(apply.step("Check the settings"))
    shutil.copy(saved, ci.repo / "plan.json")
    applied = ok(apply.step("Apply the saved plan"))
    assert re.search(r"Apply: \d+ applied, 0 failed", applied), applied

    # A pull request whose saved plan expired: apply plans again, and says so.
    tune_hook(ci.repo, "timeoutMs: 5000", "timeoutMs: 7000")
    (ci.repo / "plan.json").unlink()
    again = ok(apply.step("Plan again"))
    assert "The saved plan has expired: planning again" in again
    assert "Planned again at apply time" in apply.summary.read_text()
    assert "Apply: 1 applied, 0 failed" in ok(apply.step("Apply the saved plan"))

    # Schedule: drift reads with the viewer key.
    drift = GitHubJob(ci, workflow, "drift", {**shared, **production})
    assert drift.env["GOVSYNC_API_KEY"] == VIEWER
    ok(drift.step("Check the settings"))
    assert "In sync." in ok(drift.step("Check for drift"))


# -- GitLab CI -----------------------------------------------------------------------


class StubGitLab:
    """The GitLab API calls of the apply job, for one merged merge request."""

    def __init__(self) -> None:
        self.plan: bytes | None = None
        self.calls: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                stub.calls.append(self.path)
                status, body = stub.answer(self.path, self.headers.get("PRIVATE-TOKEN"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v4"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, token: str | None) -> tuple[int, bytes]:
        if token != GITLAB_TOKEN:
            return 401, b'{"message": "401 Unauthorized"}'
        routes: dict[str, Any] = {
            "/api/v4/projects/1/repository/commits/c0ffee/merge_requests":
                [{"iid": 7, "state": "merged", "target_branch": "main"}],
            "/api/v4/projects/1/merge_requests/7/pipelines": [{"id": 70, "status": "success"}],
            "/api/v4/projects/1/pipelines/70/jobs?scope[]=success":
                [{"id": 700, "name": "plan", "web_url": "https://gitlab.example.com/jobs/700"}],
        }
        if path == "/api/v4/projects/1/jobs/700/artifacts/plan.json":
            return (200, self.plan) if self.plan is not None else (404, b"{}")
        if path in routes:
            return 200, json.dumps(routes[path]).encode()
        return 404, b'{"message": "404 Not Found"}'

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gitlab() -> Iterator[StubGitLab]:
    stub = StubGitLab()
    yield stub
    stub.close()


class GitLabJob:
    def __init__(self, ci: CI, pipeline: dict[str, Any], name: str,
                 settings: Mapping[str, str]) -> None:
        self.ci = ci
        job = pipeline[name]
        self.script = "\n".join([*pipeline["default"]["before_script"], *job["script"]])
        self.env = {**{k: str(v) for k, v in pipeline["variables"].items()}, **settings}

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        return self.ci.bash(self.script, {**self.env, **env})


def test_gitlab_jobs(ci: CI, gitlab: StubGitLab) -> None:
    pipeline = yaml.safe_load((ci.repo / ".gitlab-ci.yml").read_text())
    shared, production = ci.shared, ci.production
    assert pipeline["apply"]["environment"] == "production"
    assert pipeline["drift"]["environment"]["name"] == "production"
    project = {"CI_API_V4_URL": gitlab.url, "CI_PROJECT_ID": "1", "CI_COMMIT_SHA": "c0ffee",
               "CI_COMMIT_SHORT_SHA": "c0ffee", "CI_COMMIT_BRANCH": "main",
               "CI_MERGE_REQUEST_IID": "7", "CI_PIPELINE_URL": "https://gitlab.example.com/p/1"}

    # Merge request: no production value reaches it (they are scoped to it).
    ok(GitLabJob(ci, pipeline, "validate", shared).run())
    out = ok(GitLabJob(ci, pipeline, "plan", {}).run(**project), 1)
    assert "GOVSYNC_STATE_READONLY is not set" in out and "GOVSYNC_VIEWER_API_KEY is not set" in out
    out = ok(GitLabJob(ci, pipeline, "plan", shared).run(**project))
    assert "GOVSYNC_GITLAB_TOKEN is not set: the plan is not posted" in out
    assert ci.pip_log.read_text().splitlines()[0] == f"install --quiet -r {REQUIREMENTS}"
    gitlab.plan = (ci.repo / "plan.json").read_bytes()
    (ci.repo / "plan.json").unlink()

    # Merge: without its token apply stops cleanly, saying what to set.
    apply = GitLabJob(ci, pipeline, "apply", {**shared, **production})
    out = ok(apply.run(**project), 1)
    assert "GOVSYNC_GITLAB_TOKEN is not set: apply needs it" in out, out
    assert "Traceback" not in out and "KeyError" not in out
    out = ok(apply.run(**project, GOVSYNC_GITLAB_TOKEN="wrong"), 1)
    assert "GitLab refused GOVSYNC_GITLAB_TOKEN (401" in out and "Traceback" not in out, out

    out = ok(apply.run(**project, GOVSYNC_GITLAB_TOKEN=GITLAB_TOKEN))
    assert "Applying the plan of !7 from https://gitlab.example.com/jobs/700" in out, out
    assert "Planning again" not in out
    assert re.search(r"Apply: \d+ applied, 0 failed", out), out

    # The merge request's saved plan has expired: apply plans again, and says so.
    tune_hook(ci.repo, "timeoutMs: 5000", "timeoutMs: 9000")
    gitlab.plan = None
    out = ok(apply.run(**project, GOVSYNC_GITLAB_TOKEN=GITLAB_TOKEN))
    assert "has expired: planning again from the merged commit" in out, out
    assert "Apply: 1 applied, 0 failed" in out, out

    # Schedule: drift, with the viewer key.
    drift = GitLabJob(ci, pipeline, "drift", {**shared, **production})
    assert "In sync." in ok(drift.run(**project))
    assert os.path.isfile(ci.repo / "drift.md")
