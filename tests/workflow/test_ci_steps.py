"""The CI templates' shell steps, run here as the CI runs them (issue 23).

Every `run:` step of the GitHub workflow's jobs and every script of the
GitLab pipeline's jobs, read from the templates that ``govsync init`` writes,
runs with bash (``-eo pipefail``, as both CIs do) in a repository made by
``govsync init`` and then given what a team gives it: two environments on two
API servers, a patch for prod, a prod rule and two signed approvals for prod,
with the variables each job gets: the pull-request jobs only the viewer key
and the state's read-only role, the apply jobs their environment's key and
owner credentials.  The GitHub jobs keep their state in PostgreSQL (the
read-only role a real one, made with the GRANTs ``govsync state readonly-role``
prints), the GitLab jobs and the action in SQLite: a template's steps do not
depend on the backend, and each backend is met by both kinds of job.  ``pip`` is a stub
that records what it was asked to install (installing for real is
test_packaging's business); the GitLab API is a stub server that knows one
merged merge request.  The JavaScript steps (comments, downloads) are GitHub's
own actions: the test does what they do with files.
"""

from __future__ import annotations

import contextlib
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
from testkit import ReaderRole, reader_role

pytestmark = pytest.mark.slow

VIEWER = "ci-steps-viewer-key"
GITLAB_TOKEN = "ci-steps-gitlab-token"
SPEC = "govsync[postgres] @ git+https://git.example.com/govsync.git@" + "ab" * 20
SECRETS = {"GOVSYNC_LOGSTORE_API_KEY": "ci-logstore-0f3e", "GOVSYNC_AI_PROVIDER_API_KEY": "ci-ai-9a1b"}
EXPRESSION = re.compile(r"\$\{\{\s*(vars|secrets|matrix)\.(\w+)\s*\}\}")
STUB_PIP = """#!/bin/sh
# The CI's pip: records its arguments; `-r FILE` must name a file.
echo "$*" >> "$PIP_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = -r ]; then test -f "$2" || { echo "pip: no such file: $2" >&2; exit 1; }; fi
  shift
done
"""
PROD_PATCH = """\
apiVersion: govsync/v1
kind: Patch
metadata: {name: prod-ticket-check}
spec:
  target: Hook/ticket_check
  merge: {timeoutMs: 3000, description: Checks the ticket (prod).}
"""
RULES = """
rules:
  - name: prod-hooks-fast
    match: {kinds: [Hook], environments: [prod]}
    expression: "object.spec.timeoutMs <= 4000"
    message: "hooks in prod time out within 4 s"
approvals:
  required: 2
  allowedSigners: allowed_signers
  environments: [prod]
"""


class CI:
    """A checkout of the scaffolded, then governed, repository, its two API servers,
    and the values CI gives its jobs."""

    def __init__(self, tmp_path: Path, repo: Path, servers: dict[str, Server],
                 owner: str, reader: str, role: ReaderRole | None) -> None:
        self.repo = repo
        self.servers = servers
        self.owner, self.reader, self.role = owner, reader, role
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "pip").write_text(STUB_PIP)
        (self.bin / "pip").chmod(0o755)
        self.pip_log = tmp_path / "pip.log"
        self.files = tmp_path / "runner"
        self.files.mkdir()
        # What the settings hold: repository-wide read-only values, and each GitHub
        # (GitLab) environment's own (apply).
        self.shared = {"GOVSYNC_STATE_READONLY": reader, "GOVSYNC_VIEWER_API_KEY": VIEWER}
        self.production = {"GOVSYNC_STATE": owner, "GOVSYNC_API_KEY": KEY, **SECRETS}
        keys = tmp_path / "keys"
        keys.mkdir()
        self.keys = []
        for name in ("alice", "bob"):
            key = keys / name
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                           check=True)
            kind, b64 = key.with_suffix(".pub").read_text().split()[:2]
            with open(repo / "allowed_signers", "a") as fh:
                fh.write(f"{name}@example.com {kind} {b64}\n")
            self.keys.append(key)

    def bash(self, script: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        base = {"PATH": f"{self.bin}:{Path(sys.executable).parent}:/usr/bin:/bin",
                "HOME": str(self.files), "PIP_LOG": str(self.pip_log), "NO_COLOR": "1"}
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                              cwd=self.repo, env={**base, **env}, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    def govsync(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """govsync as an administrator or a reviewer runs it (not a CI step)."""
        return self.bash(" ".join(f"'{a}'" for a in ("govsync", *args)), env)

    def grant_reader(self) -> None:
        """The bootstrap an administrator runs once: the read-only role's GRANTs."""
        if self.role is not None:
            self.role.grant(ok(self.govsync("state", "readonly-role", self.role.role,
                                            "--state", self.owner)))

    def hook(self, env: str) -> dict[str, Any]:
        (hook,) = [h for h in self.servers[env].objects().get("Hook", [])
                   if h["name"] == "ticket_check"]
        return hook


def ok(proc: subprocess.CompletedProcess[str], code: int = 0) -> str:
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def initialised(tmp_path: Path) -> tuple[Path, dict[str, Server]]:
    """A repository as `govsync init` writes it for both CIs, and a reference server for
    each of its two environments (with a viewer key), started."""
    repo = tmp_path / "repo"
    for which in ("github", "gitlab"):
        result = CliRunner().invoke(cli, ["init", str(repo), "--ci", which, "--force"],
                                    env={INSTALL_SPEC_ENV: SPEC})
        assert result.exit_code == 0, result.output
    servers = {env: Server(tmp_path, f"api-{env}", flags=["--viewer-key", VIEWER],
                           seed=repo / "local-seed.yaml") for env in ("staging", "prod")}
    for server in servers.values():
        server.start()
    return repo, servers


def on(backend: str) -> pytest.MarkDecorator:
    """A test of the ``ci`` fixture with its state in ``backend`` (sqlite, postgres)."""
    return pytest.mark.parametrize("ci", [pytest.param(backend, marks=(
        [pytest.mark.postgres] if backend == "postgres" else []))], indirect=True)


@pytest.fixture
def ci(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CI]:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    repo, servers = initialised(tmp_path)
    # What a team adds to what init wrote: endpoints, a prod patch, a rule, approvals.
    project = (repo / "govsync.yaml").read_text()
    project = project.replace(
        "  staging:\n    paths: [manifests/]",
        f"  staging:\n    paths: [manifests/]\n    endpoint: {servers['staging'].url}")
    project = project.replace(
        "  prod:\n    paths: [manifests/]",
        f"  prod:\n    paths: [manifests/, envs/prod/]\n    endpoint: {servers['prod'].url}")
    (repo / "govsync.yaml").write_text(project + RULES)
    (repo / "envs" / "prod").mkdir(parents=True)
    (repo / "envs" / "prod" / "patch.yaml").write_text(PROD_PATCH)
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            stack.callback(server.stop)
        if request.param == "postgres":
            url = os.environ.get("GOVSYNC_TEST_POSTGRES")
            if not url:
                pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
            role = stack.enter_context(reader_role(url, "ci"))
            yield CI(tmp_path, repo, servers, role.writer, role.reader, role)
        else:
            state = str(tmp_path / "shared-state.db")  # outside the checkout, as in CI
            yield CI(tmp_path, repo, servers, state, state, None)


def tune_hook(repo: Path, old: str, new: str) -> None:
    path = repo / "manifests" / "hooks-and-policies.yaml"
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


# -- GitHub Actions -----------------------------------------------------------------


class GitHubJob:
    def __init__(self, ci: CI, workflow: dict[str, Any], name: str,
                 settings: Mapping[str, str], matrix: Mapping[str, str] | None = None) -> None:
        self.ci = ci
        self.job = workflow["jobs"][name]
        self.output = ci.files / f"{name}.output"
        self.summary = ci.files / f"{name}.summary"
        self.github_env = ci.files / f"{name}.env"
        self.github_env.unlink(missing_ok=True)
        self.env = {"GITHUB_OUTPUT": str(self.output), "GITHUB_STEP_SUMMARY": str(self.summary),
                    "GITHUB_ENV": str(self.github_env)}
        contexts = {"vars": settings, "secrets": settings, "matrix": matrix or {}}
        for key, value in {**workflow["env"], **self.job.get("env", {})}.items():
            self.env[key] = EXPRESSION.sub(
                lambda m: contexts[m.group(1)].get(m.group(2), ""), str(value))
            assert "${{" not in self.env[key], (key, value)

    def step(self, name: str, **env: str) -> subprocess.CompletedProcess[str]:
        [step] = [s for s in self.job["steps"] if s.get("name") == name]
        done = self.ci.bash(step["run"], {**self.env, **step.get("env", {}), **env})
        # What a step writes to $GITHUB_ENV is in the environment of the steps after it.
        if self.github_env.exists():
            self.env.update(line.split("=", 1) for line in
                            self.github_env.read_text().splitlines() if "=" in line)
        return done

    def outputs(self) -> dict[str, str]:
        lines = self.output.read_text().splitlines() if self.output.exists() else []
        return dict(line.split("=", 1) for line in lines)


@on("postgres")
def test_github_jobs(ci: CI) -> None:
    workflow = yaml.safe_load((ci.repo / ".github/workflows/govsync.yml").read_text())
    # A team's typical settings: a repository-wide GOVSYNC_ENDPOINT beside the
    # environments' own endpoints (issue 34: it made even listing them fail).
    shared = {**ci.shared, "GOVSYNC_ENDPOINT": "https://repository-wide.example.com"}
    production = ci.production

    listed = GitHubJob(ci, workflow, "environments", {})
    ok(listed.step("Install govsync"))
    ok(listed.step("List the environments"))
    names = json.loads(listed.outputs()["names"])
    assert names == ["staging", "prod"]  # govsync.yaml's order

    # Pull request: a job without its settings says which ones it misses.
    unset = GitHubJob(ci, workflow, "plan", {})
    out = ok(unset.step("Check the settings"), 1)
    for name in ("GOVSYNC_STATE_READONLY", "GOVSYNC_VIEWER_API_KEY"):
        assert f"secret {name}" in out, out
    assert "no endpoint" not in out  # govsync.yaml gives both environments one
    assert "::error::environment staging: secret GOVSYNC_VIEWER_API_KEY is not set" in out, out
    assert "Traceback" not in out
    # ... and the comment says it in the same lines.
    assert "secret GOVSYNC_VIEWER_API_KEY is not set" in (ci.repo / "settings.txt").read_text()

    plan = GitHubJob(ci, workflow, "plan", {**shared, **production})
    assert plan.env["GOVSYNC_API_KEY"] == VIEWER  # never the key that writes
    assert plan.env["GOVSYNC_STATE"] == ci.reader
    assert KEY not in json.dumps(plan.env) and SECRETS["GOVSYNC_LOGSTORE_API_KEY"] not in (
        json.dumps(plan.env))
    ok(plan.step("Install govsync"))
    assert ci.pip_log.read_text() == f"install -r {REQUIREMENTS}\n" * 2  # both jobs
    ok(plan.step("Check the settings"))
    ok(plan.step("Validate"))
    assert plan.outputs()["status"] == "0"
    assert "(environment prod): valid." in (ci.repo / "validate.txt").read_text()
    out = ok(plan.step("Plan every environment"))
    assert plan.outputs()["status"] == "0", out
    plans = ci.repo / "plans"
    assert sorted(p.name for p in plans.glob("*.json")) == ["prod.json", "staging.json"]
    prod_md = (plans / "prod.md").read_text()
    assert "timeoutMs: 3000" in prod_md  # the prod patch applied (not dropped)
    assert "description: \"Checks the ticket (prod).\"" in prod_md
    assert "timeoutMs: 5000" in (plans / "staging.md").read_text()
    assert "workspace `prod`" in prod_md and "workspace `staging`" in (plans / "staging.md").read_text()
    assert json.loads((plans / "prod.json").read_text())["mac"] is None  # evidence only
    artifact = ci.files / "artifact"
    shutil.copytree(plans, artifact)

    # The bootstrap: the read-only role is made once, by an administrator.
    ci.grant_reader()

    # Reviewers approve prod's plan on their machines and post the signatures.
    for key in ci.keys:
        ok(ci.govsync("approve", "--yes", str(artifact / "prod.json"), "--key", str(key)))
    signatures = (artifact / "prod.json.sig").read_text()

    # Merge: each environment's apply job, in order, with its own credentials.
    def apply_job(env: str, reviewed: Path | None) -> GitHubJob:
        job = GitHubJob(ci, workflow, "apply", {**shared, **production}, {"env": env})
        assert job.env["GOVSYNC_ENV"] == env and job.env["GOVSYNC_API_KEY"] == KEY
        ok(job.step("Install govsync"))
        ok(job.step("Check the settings"))
        shutil.rmtree(ci.repo / "plans", ignore_errors=True)
        (ci.repo / "plans").mkdir()
        if reviewed is not None:  # Download the reviewed plans, Collect the approvals
            shutil.copy(reviewed, ci.repo / "plans" / f"{env}.json")
            (ci.repo / "plans" / f"{env}.json.sig").write_text(signatures)
        return job

    staging = ok(apply_job("staging", artifact / "staging.json").step("Apply"))
    assert re.search(r"Apply: \d+ applied, 0 failed", staging), staging
    assert ci.hook("staging")["timeoutMs"] == 5000

    # A forged artifact (the pull request's own job could have written anything)
    # makes the prod apply refuse: it plans again and compares.
    forged = ci.files / "forged.json"
    data = json.loads((artifact / "prod.json").read_text())
    for change in data["changes"]:
        if change["address"] == "Hook/ticket_check":
            change["request"]["timeoutMs"] = 3999
    forged.write_text(json.dumps(data))
    refused = ok(apply_job("prod", forged).step("Apply"), 1)
    assert "differs from the reviewed" in refused and "request.timeoutMs" in refused
    assert not ci.servers["prod"].objects().get("Hook")

    prod = ok(apply_job("prod", artifact / "prod.json").step("Apply"))
    assert re.search(r"Apply: \d+ applied, 0 failed", prod), prod
    hook = ci.hook("prod")
    assert hook["timeoutMs"] == 3000 and hook["description"] == "Checks the ticket (prod)."
    again = ok(apply_job("prod", artifact / "prod.json").step("Apply"), 1)
    assert "applied already" in again  # a reviewed plan applies once

    # A later merge whose plans are gone: staging plans again; prod needs approvals.
    tune_hook(ci.repo, "timeoutMs: 5000", "timeoutMs: 3500")
    assert "Apply: 1 applied" in ok(apply_job("staging", None).step("Apply"))
    refused = ok(apply_job("prod", None).step("Apply"), 1)
    assert "requires 2 signed approval(s)" in refused
    assert ci.hook("prod")["timeoutMs"] == 3000

    # Schedule: drift per environment, with the read-only credentials.
    for env, expected in (("staging", 0), ("prod", 0)):
        drift = GitHubJob(ci, workflow, "drift", {**shared, **production}, {"env": env})
        assert drift.env["GOVSYNC_API_KEY"] == VIEWER and drift.env["GOVSYNC_STATE"] == ci.reader
        ok(drift.step("Check the settings"))
        assert "In sync." in ok(drift.step("Check for drift"), expected)


# -- GitLab CI -----------------------------------------------------------------------


class StubGitLab:
    """The GitLab API calls of the apply jobs, for one merged merge request."""

    def __init__(self) -> None:
        self.plans: dict[str, bytes] = {}
        self.notes: list[dict[str, Any]] = []
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
            "/api/v4/projects/1/pipelines/70/jobs":
                [{"id": 700, "name": "plan", "web_url": "https://gitlab.example.com/jobs/700"}],
            "/api/v4/projects/1/merge_requests/7/notes?per_page=100": self.notes,
        }
        prefix = "/api/v4/projects/1/jobs/700/artifacts/plans/"
        if path.startswith(prefix):
            env = path[len(prefix):].removesuffix(".json")
            return (200, self.plans[env]) if env in self.plans else (404, b"{}")
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
        job = dict(pipeline[name])
        if "extends" in job:
            job = {**pipeline[job["extends"]], **job}
        self.job = job
        self.script = "\n".join([*pipeline["default"]["before_script"], *job["script"]])
        self.env = {**{k: str(v) for k, v in pipeline["variables"].items()},
                    **{k: str(v) for k, v in job.get("variables", {}).items()}, **settings}

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        return self.ci.bash(self.script, {**self.env, **env})


@on("sqlite")
def test_gitlab_jobs(ci: CI, gitlab: StubGitLab) -> None:
    pipeline = yaml.safe_load((ci.repo / ".gitlab-ci.yml").read_text())
    # A project-wide GOVSYNC_ENDPOINT beside the environments' own (issue 34).
    shared = {**ci.shared, "GOVSYNC_ENDPOINT": "https://project-wide.example.com"}
    production = ci.production
    project = {"CI_API_V4_URL": gitlab.url, "CI_PROJECT_ID": "1", "CI_COMMIT_SHA": "c0ffee",
               "CI_COMMIT_SHORT_SHA": "c0ffee", "CI_COMMIT_BRANCH": "main",
               "CI_MERGE_REQUEST_IID": "7", "CI_PIPELINE_URL": "https://gitlab.example.com/p/1"}

    # Merge request: no environment's value reaches it (they are scoped to them).
    assert "(environment prod): valid." in ok(GitLabJob(ci, pipeline, "validate", shared).run())
    out = ok(GitLabJob(ci, pipeline, "plan", {}).run(**project), 1)
    assert "GOVSYNC_STATE_READONLY is not set" in out and "GOVSYNC_VIEWER_API_KEY is not set" in out
    out = ok(GitLabJob(ci, pipeline, "plan", shared).run(**project))
    assert "GOVSYNC_GITLAB_TOKEN is not set: the plans are not posted" in out
    assert ci.pip_log.read_text().splitlines()[0] == f"install --quiet -r {REQUIREMENTS}"
    assert "timeoutMs: 3000" in (ci.repo / "plans" / "prod.md").read_text()
    for env in ("staging", "prod"):
        gitlab.plans[env] = (ci.repo / "plans" / f"{env}.json").read_bytes()
    review = ci.files / "prod.json"
    review.write_bytes(gitlab.plans["prod"])
    for key in ci.keys:
        ok(ci.govsync("approve", "--yes", str(review), "--key", str(key)))
    gitlab.notes.append({"body": "LGTM\n" + (ci.files / "prod.json.sig").read_text()})
    shutil.rmtree(ci.repo / "plans")

    ci.grant_reader()

    # Merge: without its token apply stops cleanly, saying what to set.
    staging = GitLabJob(ci, pipeline, "apply:staging", {**shared, **production})
    assert staging.env["GOVSYNC_ENV"] == "staging"
    out = ok(staging.run(**project), 1)
    assert "GOVSYNC_GITLAB_TOKEN is not set: apply needs it" in out, out
    assert "Traceback" not in out and "KeyError" not in out
    out = ok(staging.run(**project, GOVSYNC_GITLAB_TOKEN="wrong"), 1)
    assert "GitLab refused GOVSYNC_GITLAB_TOKEN (401" in out and "Traceback" not in out, out

    out = ok(staging.run(**project, GOVSYNC_GITLAB_TOKEN=GITLAB_TOKEN))
    assert "The reviewed plan of staging, from !7" in out, out
    assert re.search(r"Apply: \d+ applied, 0 failed", out), out
    prod = GitLabJob(ci, pipeline, "apply:prod", {**shared, **production})
    out = ok(prod.run(**project, GOVSYNC_GITLAB_TOKEN=GITLAB_TOKEN))
    assert re.search(r"Apply: \d+ applied, 0 failed", out), out
    assert ci.hook("prod")["timeoutMs"] == 3000 and ci.hook("staging")["timeoutMs"] == 5000

    # A later merge whose reviewed plans have expired: staging plans again and
    # applies; prod requires approvals, so it refuses.
    tune_hook(ci.repo, "timeoutMs: 5000", "timeoutMs: 4500")
    gitlab.plans.clear()
    out = ok(staging.run(**project, GOVSYNC_GITLAB_TOKEN=GITLAB_TOKEN))
    assert "There is no reviewed plan of staging" in out and "Apply: 1 applied" in out, out
    out = ok(prod.run(**project, GOVSYNC_GITLAB_TOKEN=GITLAB_TOKEN), 1)
    assert "requires 2 signed approval(s)" in out, out

    # Schedule: drift per environment, with the read-only credentials.
    tune_hook(ci.repo, "timeoutMs: 4500", "timeoutMs: 5000")
    for env, code in (("staging", 2), ("prod", 0)):
        drift = GitLabJob(ci, pipeline, f"drift:{env}", {**shared, **production})
        out = ok(drift.run(**project), code)
        assert ("In sync." if code == 0 else f"Drift in {env}") in out, out
        assert os.path.isfile(ci.repo / f"drift-{env}.md")


# -- action.yml ------------------------------------------------------------------------


@on("sqlite")
def test_the_action_runs_the_environments_paths_and_commands_of_several_words(
        ci: CI) -> None:
    """Issue 23: `command: state list` was one word; the default paths replaced the
    environment's (its patches dropped)."""
    action = yaml.safe_load((Path(__file__).resolve().parents[2] / "action.yml").read_text())
    [step] = [s for s in action["runs"]["steps"] if s.get("name") == "Run govsync"]
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}

    def run(**given: str) -> subprocess.CompletedProcess[str]:
        values = {**inputs, **given}
        # The step's own env, its ${{ inputs.NAME }} filled in (a new input is not missed).
        env = {name: re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}",
                            lambda m: values.get(m.group(1), ""), str(value))
               for name, value in (step.get("env") or {}).items()}
        env.update({"GITHUB_OUTPUT": str(ci.files / "action.output"),
                    "GOVSYNC_STATE": ci.reader, "GOVSYNC_API_KEY": VIEWER})
        return ci.bash(step["run"], env)

    planned = ok(run(env="prod", args="--without-secrets"))
    assert "timeoutMs: 3000" in planned  # envs/prod's patch: the environment's paths
    # An environment's settings are checked first, each problem one line (issue 34).
    missing = ci.bash(step["run"], {"COMMAND": "plan", "PATHS": "", "ARGS": "", "ALLOWED": "0",
                                    "GOVSYNC_ENV": "prod", "GOVSYNC_WORKSPACE": "",
                                    "GITHUB_OUTPUT": str(ci.files / "action.output"),
                                    "GOVSYNC_STATE": ci.reader})
    assert missing.returncode == 1
    assert ("::error::environment prod: GOVSYNC_API_KEY is not set: the API key of "
            "environment prod") in missing.stdout, missing.stdout + missing.stderr
    assert "Traceback" not in missing.stdout + missing.stderr
    listed = ok(run(command="state list", env="prod"))
    assert "workspace 'prod'" in listed
    assert "exit-code=0" in (ci.files / "action.output").read_text()


# -- two API instances, two keys, two states --------------------------------------------

TWO = {"STAGING_API_KEY": "ci-staging-key", "STAGING_VIEWER_KEY": "ci-staging-viewer",
       "PROD_API_KEY": "ci-prod-key", "PROD_VIEWER_KEY": "ci-prod-viewer"}


@pytest.mark.postgres
def test_github_jobs_for_two_instances_with_their_own_keys_and_states(tmp_path: Path) -> None:
    """Issue 34: staging and prod on separate API instances, each with its own keys
    (named in govsync.yaml by their variables) and its own state (staging SQLite,
    prod PostgreSQL), beside the repository variable GOVSYNC_ENDPOINT a team sets:
    every job passes, and a missing key is one line naming it."""
    url = os.environ.get("GOVSYNC_TEST_POSTGRES")
    if not url:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    repo = tmp_path / "repo"
    result = CliRunner().invoke(cli, ["init", str(repo), "--ci", "github"],
                                env={INSTALL_SPEC_ENV: SPEC})
    assert result.exit_code == 0, result.output
    servers = {env: Server(tmp_path, f"two-{env}", seed=repo / "local-seed.yaml",
                           flags=["--api-key", TWO[f"{env.upper()}_API_KEY"],
                                  "--viewer-key", TWO[f"{env.upper()}_VIEWER_KEY"]])
               for env in ("staging", "prod")}
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            server.start()
            stack.callback(server.stop)
        role = stack.enter_context(reader_role(url, "two"))
        project = (repo / "govsync.yaml").read_text()
        for env, state in (("staging", str(tmp_path / "staging-state.db")),
                           ("prod", role.writer)):
            name = env.upper()
            project = project.replace(
                f"  {env}:\n    paths: [manifests/]",
                f"  {env}:\n    paths: [manifests/]\n    endpoint: {servers[env].url}\n"
                f"    state: {state}\n    apiKey: {{fromEnv: {name}_API_KEY}}\n"
                f"    viewerKey: {{fromEnv: {name}_VIEWER_KEY}}")
        (repo / "govsync.yaml").write_text(project)
        ci = CI(tmp_path, repo, servers, role.writer, role.reader, None)
        workflow = yaml.safe_load((repo / ".github/workflows/govsync.yml").read_text())
        # What the workflow's opening comment says to add: each key variable, one line each.
        for job, names in (("plan", ("STAGING_VIEWER_KEY", "PROD_VIEWER_KEY")),
                           ("drift", ("STAGING_VIEWER_KEY", "PROD_VIEWER_KEY")),
                           ("apply", ("STAGING_API_KEY", "PROD_API_KEY"))):
            workflow["jobs"][job]["env"].update({n: f"${{{{ secrets.{n} }}}}" for n in names})
        # The repository's settings: a repository-wide endpoint, no shared state.
        settings = {"GOVSYNC_ENDPOINT": "https://repository-wide.example.com", **TWO, **SECRETS}

        listed = GitHubJob(ci, workflow, "environments", settings)
        ok(listed.step("List the environments"))
        assert json.loads(listed.outputs()["names"]) == ["staging", "prod"]
        plan = GitHubJob(ci, workflow, "plan", settings)
        ok(plan.step("Check the settings"))
        out = ok(plan.step("Plan every environment"))
        assert plan.outputs()["status"] == "0", out
        for env in ("staging", "prod"):
            job = GitHubJob(ci, workflow, "apply", settings, {"env": env})
            ok(job.step("Check the settings"))
            applied = ok(job.step("Apply"))
            assert re.search(r"Apply: \d+ applied, 0 failed", applied), applied
            assert ci.hook(env)["name"] == "ticket_check"
        assert (tmp_path / "staging-state.db").exists()
        for env in ("staging", "prod"):
            drift = GitHubJob(ci, workflow, "drift", settings, {"env": env})
            ok(drift.step("Check the settings"))
            assert "In sync." in ok(drift.step("Check for drift"))

        # A missing secret: one line naming it, before anything runs.
        lacking = {k: v for k, v in settings.items() if k != "PROD_API_KEY"}
        job = GitHubJob(ci, workflow, "apply", lacking, {"env": "prod"})
        out = ok(job.step("Check the settings"), 1)
        assert ("::error::environment prod: PROD_API_KEY is not set: the API key of "
                "environment prod (in the GitHub environment prod)") in out, out
        assert "Traceback" not in out
