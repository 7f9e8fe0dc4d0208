"""What bad input gets: one line per problem, exit 1, nothing written, never a secret.

And what input migrate reads but does not migrate: unknown resource types
are listed (not fatal), a sensitive value that govsync would have to write
in clear stays in Terraform.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from migratekit import FORMAL, Govsync, Run, TerraformState, attr, instance

from govsync.cli import cli

CANARY = "canary-5e1f0c7d9a2b4e6f8a0c1d3e5f7a9b1c"


def space(name: str, **more: Any) -> dict[str, Any]:
    return {"id": f"space-{name}", "name": name, "description": "", "created_at": 1,
            "termination_protection": False, **more}


def splunk_state() -> TerraformState:
    """A valid state whose log integration holds a secret (the canary) in clear."""
    state = TerraformState()
    state.add("formal_space", "a", instance(space("a"), schema_version=1))
    state.add("formal_integration_log", "siem", instance({
        "id": "log-1", "name": "siem", "datadog": [], "aws_s3": [], "gcs": [],
        "splunk": [{"host": "h.example", "port": 8088, "access_token": CANARY}],
        "timeouts": None}))
    return state


@pytest.fixture
def migrate(tmp_path: Path) -> Callable[..., Run]:
    gov = Govsync(tmp_path, str(tmp_path / "state.db"), "default", None)

    def run(text: str | bytes, *args: str, out: str = "out") -> Run:
        source = tmp_path / "terraform.tfstate"
        source.write_bytes(text.encode() if isinstance(text, str) else text)
        result = gov.invoke("migrate", "terraform", str(source), "--out",
                            str(tmp_path / out), *args)
        assert CANARY not in result.out + result.err
        return result
    return run


def errors(run: Run) -> list[str]:
    return [line for line in run.err.splitlines() if line.startswith("Error: ")]


@pytest.mark.parametrize(("text", "expected"), [
    ("", "empty: expected the JSON that `terraform state pull` prints"),
    ("terraform {}", ":1:1: not a JSON document: Expecting value"),
    ('{"version": 4, "resources": [', "not a JSON document"),
    ('["version", 4]', "not a Terraform state: the JSON is a list, not an object"),
    ('{"version": 3, "resources": []}', "a Terraform state of format version 3: this reads "
                                        "format version 4"),
    ('{"resources": []}', "a Terraform state of no format version"),
    ('{"version": 4, "resources": {}}', "resources: must be a list"),
    ('{"version": 4, "resources": [], "serial": NaN}', "not a JSON document"),
])
def test_a_state_that_is_not_one_is_one_line_and_nothing_is_written(
        migrate: Callable[..., Run], tmp_path: Path, text: str, expected: str) -> None:
    run = migrate(text)
    assert run.code == 1, run
    (line,) = errors(run)
    assert expected in line, run
    assert str(tmp_path / "terraform.tfstate") in line
    assert not (tmp_path / "out").exists()


def test_a_truncated_state_says_where_it_ends_and_shows_nothing_of_it(
        migrate: Callable[..., Run], tmp_path: Path) -> None:
    text = json.dumps(splunk_state().document(), indent=2)
    cut = text[:text.index(CANARY) + 10]
    run = migrate(cut)
    assert run.code == 1
    (line,) = errors(run)
    lines = cut.count("\n") + 1
    assert f":{lines}:" in line and "it ends too early" in line, line
    assert not (tmp_path / "out").exists()


def test_not_utf8_is_refused(migrate: Callable[..., Run]) -> None:
    run = migrate(b'{"version": 4, "lineage": "\xff"}')
    assert run.code == 1 and "not UTF-8 text" in run.err


def test_malformed_resources_are_one_line_each(migrate: Callable[..., Run],
                                               tmp_path: Path) -> None:
    state = splunk_state().document()
    state["resources"] += [
        "formal_space.x",
        {"mode": "managed", "type": "formal_space", "name": "b", "provider": FORMAL,
         "instances": [{"schema_version": 1, "attributes": [CANARY]}]},
        {"mode": "managed", "type": "formal_space", "name": "c", "provider": FORMAL,
         "instances": [{"schema_version": 0, "attributes_flat": {"id": "x"}}]},
        {"mode": "managed", "type": "formal_space", "name": "d", "provider": FORMAL,
         "instances": [{"attributes": space("d"), "index_key": 1.5}]},
        {"mode": "managed", "type": "formal_space", "name": "e", "provider": FORMAL,
         "instances": [{"attributes": space("e"), "sensitive_attributes": [[{"x": 1}]]}]},
    ]
    run = migrate(json.dumps(state))
    assert run.code == 1
    lines = errors(run)
    assert len(lines) == 5, run
    assert "resources[2]: must be an object, not a string" in lines[0]
    assert "formal_space.b: attributes: must be an object, not a list" in lines[1]
    assert "formal_space.c: its attributes are in the flat form of Terraform 0.11" in lines[2]
    assert "index_key: must be an integer (count) or a string (for_each)" in lines[3]
    assert "formal_space.e: sensitive_attributes: a path in a form this does not know" \
        in lines[4]
    assert not (tmp_path / "out").exists()


def test_attributes_and_versions_of_a_provider_it_does_not_know_are_fatal(
        migrate: Callable[..., Run], tmp_path: Path) -> None:
    state = splunk_state()
    state.add("formal_space", "colourful", instance(space("colourful", colour=CANARY),
                                                    schema_version=1))
    state.add("formal_integration_log", "old", instance({
        "id": "log-2", "name": "old", "datadog": [], "aws_s3": [], "gcs": [],
        "splunk": [{"host": "h", "port": 1, "access_token": CANARY, "index": "main"}]}))
    state.add("formal_policy", "future", instance({
        "id": "p", "name": "p", "description": "", "module": "m", "status": "active"},
        schema_version=3))
    run = migrate(json.dumps(state.document()))
    assert run.code == 1
    lines = errors(run)
    assert len(lines) == 4, run
    joined = "\n".join(lines)
    assert "formal_space.colourful: attribute colour: not an attribute of formal_space that " \
           "this migration knows" in joined
    assert "formal_integration_log.old: attribute splunk.0.index: not an attribute" in joined
    assert "formal_policy.future: schema version 3 of formal_policy is newer than this " \
           "migration knows (2" in joined
    assert lines[-1] == "Error: nothing was written"
    assert not (tmp_path / "out").exists()


def test_unknown_resource_types_are_listed_and_the_rest_migrated(
        migrate: Callable[..., Run], tmp_path: Path) -> None:
    state = splunk_state()
    state.add("formal_datastore", "legacy", instance({"id": "ds-1", "name": "x"}))
    state.add("formal_workflow", "approve", instance({"id": "wf-1", "name": "x"}))
    state.add("formal_space", "other", instance(space("other")),
              provider='provider["registry.terraform.io/someone/formal"]')
    run = migrate(json.dumps(state.document()))
    assert run.code == 0, run
    assert "Migrated 2 of 4" in run.out
    report = (tmp_path / "out" / "MIGRATION.md").read_text()
    assert "| `formal_datastore.legacy` | not a resource type of formalco/formal 4.23.2 " \
           "that this migration knows |" in report
    assert "`formal_workflow.approve` | the API govsync drives has no operation" in report
    assert "1 resource instance of other providers" in report


def test_a_sensitive_value_govsync_would_write_in_clear_stays_in_terraform(
        migrate: Callable[..., Run], tmp_path: Path) -> None:
    state = TerraformState()
    hook = {"id": "hook-1", "name": "h", "description": "", "code": CANARY, "status": "draft",
            "timeout_ms": 5000, "allowlisted_environment_variables": [],
            "allowlisted_network_hosts": [], "created_at": "", "updated_at": ""}
    # A hook whose code came from a sensitive variable: Terraform marks it sensitive.
    state.add("formal_hook", "secretive", instance(hook, sensitive=(attr("code"),)))
    state.add("formal_hook", "plain", instance({**hook, "id": "hook-2", "name": "p",
                                                "code": "export default () => 1"}))
    # The endpoint of an AI provider is inside an open variant: a sensitive one is a secret.
    state.add("formal_connector_ai_provider", "azure", instance({
        "id": "cai-1", "connector_id": "conn-x", "formal_ai_satellite": [], "gemini": [],
        "google_vertex_ai": [], "anthropic": [], "aws_bedrock": [], "openai": [],
        "azure_ai": [{"api_key": None, "api_key_version": 2, "endpoint": CANARY}]},
        sensitive=(attr("azure_ai", 0, "endpoint"),)))
    run = migrate(json.dumps(state.document()))
    assert run.code == 0, run
    out = tmp_path / "out"
    report = (out / "MIGRATION.md").read_text()
    assert ("| `formal_hook.secretive` | attribute code is sensitive in Terraform, and govsync's "
            "Hook spec.code is not a secret field") in report
    (provider,) = yaml.safe_load_all((out / "connector-ai-provider.yaml").read_text())
    assert provider["spec"]["config"] == {"providerC": {
        "apiKey": {"fromEnv": "FORMAL_CONNECTOR_AI_PROVIDER_AZURE_API_KEY"},
        "endpoint": {"fromEnv": "FORMAL_CONNECTOR_AI_PROVIDER_AZURE_ENDPOINT"}}}
    assert provider["spec"]["connectorId"] == "conn-x"  # not migrated: stays an id
    for path in out.iterdir():
        assert CANARY not in path.read_text()


def test_standard_input_is_read_with_a_dash(tmp_path: Path) -> None:
    gov = Govsync(tmp_path, str(tmp_path / "state.db"), "default", None)
    result = CliRunner().invoke(cli, ["migrate", "terraform", "-", "--out", str(tmp_path / "o")],
                                input=json.dumps(splunk_state().document()),
                                env=gov.env(), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "log-integration.yaml").is_file()
    broken = CliRunner().invoke(cli, ["migrate", "terraform", "-", "--out", str(tmp_path / "p")],
                                input="{", env=gov.env(), catch_exceptions=False)
    assert broken.exit_code == 1 and "Error: standard input:1:2: not a JSON document" \
        in broken.stderr


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    gov = Govsync(tmp_path, str(tmp_path / "state.db"), "default", None)
    run = gov.invoke("migrate", "terraform", str(tmp_path / "nope.tfstate"))
    assert run.code == 1
    assert errors(run) == [f"Error: {tmp_path / 'nope.tfstate'}: cannot read it: "
                           "No such file or directory"]


def test_tainted_deposed_and_dropped_settings_are_said(migrate: Callable[..., Run],
                                                       tmp_path: Path) -> None:
    state = TerraformState()
    tainted = instance(space("t"), schema_version=1)
    tainted["status"] = "tainted"
    deposed = instance(space("t"), schema_version=1)
    deposed["deposed"] = "00000001"
    state.add("formal_space", "t", tainted, deposed)
    state.add("formal_integration_log", "s3", instance({
        "id": "log-3", "name": "archive", "datadog": [], "splunk": [], "gcs": [],
        "aws_s3": [{"s3_bucket_name": "b", "s3_bucket_prefix": "", "region": "eu-west-1",
                    "cloud_integration_id": "ci-1", "compression": "gzip"}]}))
    run = migrate(json.dumps(state.document()))
    assert run.code == 0, run
    report = (tmp_path / "out" / "MIGRATION.md").read_text()
    assert "| `formal_space.t` | `Space/t` | `space-t` | tainted in Terraform" in report
    assert "| `formal_space.t` | a deposed object (left by create_before_destroy)" in report
    assert ("aws_s3.0.compression is set in Terraform, and govsync's LogIntegration has no "
            "such field: not carried over") in report
    (log,) = yaml.safe_load_all((tmp_path / "out" / "log-integration.yaml").read_text())
    assert log["spec"]["logStoreA"] == {"bucketName": "b", "bucketPrefix": "",
                                        "cloudIntegrationId": "ci-1"}


def test_values_the_provider_cannot_have_written_are_fatal(migrate: Callable[..., Run]) -> None:
    state = TerraformState()
    state.add("formal_integration_log", "two", instance({
        "id": "log-1", "name": "two", "aws_s3": [], "gcs": [], "datadog": [],
        "splunk": [{"host": "a", "port": 1, "access_token": CANARY},
                   {"host": "b", "port": 2, "access_token": CANARY}]}))
    state.add("formal_form", "f", instance({
        "id": "form-1", "name": "f", "description": "", "created_at": "", "updated_at": "",
        "field": [{"id": "x", "name": "X", "type": "select", "config": [{"option": [],
                   "options_source": [{"app": "a", "command": [{"name": "c"}],
                                       "machine_user_id": "u", "transform": "t",
                                       "input": None, "input_json": "[" + CANARY}]}]}]}))
    state.add("formal_policy", "who", instance({
        "id": "p-1", "name": "who", "description": "", "module": "m", "status": "active",
        "owner": ["not", "a", "string"], "created_at": "", "updated_at": ""}, schema_version=1))
    state.add("formal_space", "noid", instance({**space("noid"), "id": None}, schema_version=1))
    run = migrate(json.dumps(state.document()))
    assert run.code == 1
    lines = errors(run)
    assert "formal_integration_log.two: attribute splunk: holds 2 blocks, and the provider " \
           "allows one" in lines[0]
    assert "formal_form.f: attribute field.0.config.0.options_source.0.input_json: must be a " \
           "JSON object written as a string" in lines[1]
    assert "formal_policy.who: attribute owner: must be a string" in lines[2]
    assert "formal_space.noid: attribute id: must be the object's id" in lines[3]
