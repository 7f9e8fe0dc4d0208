"""``govsync import`` for two environments (issue 43, finding 7; docs/importing.md): the
organisation exists on a staging and a prod server, built in their consoles.  Imported
with ``--env staging`` then ``--env prod``, the shared manifests are written once, each
environment's Import documents, differences and secrets go to its own folder, each
secret under a variable of its own (``STAGING_...``, ``PROD_...``), so one agent can hold
both; each environment's plan right after sends nothing."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testkit import Served, in_process, without_settings

KEY = "import-envs-key"
CONSOLE = """\
apiVersion: govsync/v1
kind: Space
metadata: {{name: payments}}
spec: {{description: {description}}}
---
apiVersion: govsync/v1
kind: LogIntegration
metadata: {{name: siem}}
spec:
  terminationProtection: false
  logStoreB: {{site: eu1.logstore-b.example, accountId: northwind, apiKey: {{fromEnv: KEY}}}}
---
apiVersion: govsync/v1
kind: Space
metadata: {{name: {only}}}
spec: {{}}
"""
PROJECT = """\
apiVersion: govsync/v1
kind: Project
environments:
  staging:
    paths: [manifests/, envs/staging/]
    endpoint: {staging}
    state: staging.db
    apiKey: {{fromEnv: STAGING_API_KEY}}
  prod:
    paths: [manifests/, envs/prod/]
    endpoint: {prod}
    state: prod.db
    apiKey: {{fromEnv: PROD_API_KEY}}
"""


@pytest.fixture
def servers() -> Iterator[tuple[Served, Served]]:
    staging, prod = Served(["--api-key", KEY]), Served(["--api-key", KEY])
    try:
        yield staging, prod
    finally:
        staging.stop()
        prod.stop()


def documents(folder: Path, kind: str | None = None) -> list[dict[str, object]]:
    found = []
    for path in sorted(folder.rglob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text())
                  if d and (kind is None or d["kind"] == kind)]
    return found


def test_two_environments_share_their_manifests_and_keep_their_ids_and_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        servers: tuple[Served, Served]) -> None:
    without_settings(monkeypatch)
    staging, prod = servers
    env = {"STAGING_API_KEY": KEY, "PROD_API_KEY": KEY, "KEY": "console-set"}
    for server, description, only in ((staging, "Payments (staging)", "staging-only"),
                                      (prod, "Payments", "prod-only")):
        console = tmp_path / f"console-{only}"
        console.mkdir()
        (console / "org.yaml").write_text(CONSOLE.format(description=description, only=only))
        made = in_process(["apply", str(console), "--endpoint", server.url, "--state",
                           str(console / "console.db"), "--auto-approve"],
                          env={**env, "GOVSYNC_API_KEY": KEY})
        assert made.code == 0, made
    repo = tmp_path / "repo"
    (repo / "manifests").mkdir(parents=True)
    (repo / "envs" / "staging").mkdir(parents=True)
    (repo / "envs" / "prod").mkdir(parents=True)
    (repo / "govsync.yaml").write_text(PROJECT.format(staging=staging.url, prod=prod.url))

    first = in_process(["import", "--env", "staging"], env=env, cwd=repo)
    assert first.code == 0, first
    assert "Set 1 secret variable before planning: STAGING_LOG_INTEGRATION_SIEM_" in first.out
    second = in_process(["import", "--env", "prod"], env=env, cwd=repo)
    assert second.code == 0, second
    # The shared manifests written once, by the first import: prod's added nothing there.
    shared = repo / "manifests" / "imported"
    assert sorted(f"{d['kind']}/{d['metadata']['name']}" for d in documents(shared)) == [
        "LogIntegration/siem", "Space/payments", "Space/staging-only"]
    assert not documents(shared, "Import") and not documents(shared, "Patch")
    # What prod alone has is prod's; what it lacks of the shared ones is said.
    assert [d["metadata"]["name"] for d in documents(repo / "envs" / "prod", "Space")] == [
        "prod-only"]
    assert ("Not on the server: Space/staging-only (manifests/imported/space.yaml): "
            "`govsync plan --env prod` would create it") in second.err, second
    # Each environment's secrets under its own variable, through its own Patch.
    variables = second.out.split("before planning: ")[1].strip().split(", ")
    assert len(variables) == 1 and variables[0].startswith("PROD_LOG_INTEGRATION_SIEM_")
    patches = {d["spec"]["target"]: d["spec"]["merge"]  # type: ignore[index]
               for d in documents(repo / "envs" / "prod", "Patch")}
    assert patches["LogIntegration/siem"] == {"logStoreB": {"apiKey": {"fromEnv": variables[0]}}}
    assert patches["Space/payments"] == {"description": "Payments"}  # prod's differs
    staging_ids = {d["spec"]["to"]: d["spec"]["id"]  # type: ignore[index]
                   for d in documents(repo / "envs" / "staging", "Import")}
    prod_ids = {d["spec"]["to"]: d["spec"]["id"]  # type: ignore[index]
                for d in documents(repo / "envs" / "prod", "Import")}
    assert set(prod_ids) == {"LogIntegration/siem", "Space/payments", "Space/prod-only"}
    assert not set(staging_ids.values()) & set(prod_ids.values())

    # One process holds both environments' values; each plan adopts and sends nothing.
    both = {**env, first.out.split("before planning: ")[1].strip(): "staging-key",
            variables[0]: "prod-key"}
    for name, creates in (("staging", 0), ("prod", 1)):  # prod: Space/staging-only
        planned = in_process(["plan", "--env", name, "--format", "json"], env=both, cwd=repo)
        assert planned.code == 0, planned
        summary = json.loads(planned.out)["summary"]
        assert summary["update"] == 0 and summary["create"] == creates, (name, summary)
        assert summary["import"] == 3

    # Adopted (applied), then imported again: nothing new, nothing written.
    for name in ("staging", "prod"):
        applied = in_process(["apply", "--env", name, "--target", "Space/payments",
                              "--auto-approve"], env=both, cwd=repo)
        assert applied.code == 0, applied
    again = in_process(["import", "--env", "prod"], env=env, cwd=repo)
    assert again.code == 0 and "Nothing to import" in again.out, again


def test_an_environment_import_refuses_a_folder_its_plan_would_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_settings(monkeypatch)
    (tmp_path / "govsync.yaml").write_text(textwrap.dedent(PROJECT.format(
        staging="local", prod="local")))
    refused = in_process(["import", "--env", "prod", "--env-out", "elsewhere"],
                         env={"PROD_API_KEY": KEY}, cwd=tmp_path)
    assert refused.code == 1
    assert ("--env-out elsewhere: environment prod does not read it (its paths: manifests, "
            "envs/prod)") in refused.err, refused
