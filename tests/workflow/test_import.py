"""``govsync import`` (contract section 12, Adopting) against the embedded reference server.

The example organisation is applied with another state (``--state
other.db``): the server then holds every object and the default state none,
as after a misplaced state or a console-built organisation.  ``import``
writes their manifests and Import documents; ``validate`` passes; ``plan``
adopts every one (no create, no update).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from govsync.cli import cli
from testkit import EXAMPLE_MANIFESTS, EXAMPLE_SEED, without_settings

LOCAL = ("--endpoint", "local", "--local-seed", str(EXAMPLE_SEED))


@pytest.fixture
def populated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              example_secrets: dict[str, str]) -> dict[str, str]:
    """A server holding the example organisation, recorded only in other.db."""
    monkeypatch.chdir(tmp_path)
    without_settings(monkeypatch)
    for name, value in example_secrets.items():
        monkeypatch.setenv(name, value)
    applied = run("apply", str(EXAMPLE_MANIFESTS), *LOCAL, "--state", "other.db",
                  "--auto-approve")
    assert applied.exit_code == 0, applied.output
    return example_secrets


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def documents(folder: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted(folder.glob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return found


def test_import_validate_and_plan_adopt_everything(populated: dict[str, str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    done = run("import", *LOCAL, "--out", "imported")
    assert done.exit_code == 0, done.output
    assert "Imported 41 objects into imported (0 already recorded" in done.stdout
    # A suspension's read does not return how long it was made for (the service's
    # message has expireAt, not expirationMinutes): it is named, never guessed.
    assert ("Left out: PolicySuspension " in done.stderr
            and "spec.expirationMinutes: Field required" in done.stderr), done.stderr
    variables = done.stdout.split("before planning: ")[1].strip().split(", ")
    assert "BI_INTEGRATION_EXEC_DASHBOARDS_BIA_BIAAPISECRET" in variables

    docs = documents(tmp_path / "imported")
    manifests = [d for d in docs if d["kind"] != "Import"]
    imports = [d for d in docs if d["kind"] == "Import"]
    assert len(manifests) == len(imports) == 41
    assert {i["spec"]["to"] for i in imports} == {  # type: ignore[index]
        f"{m['kind']}/{m['metadata']['name']}" for m in manifests}  # type: ignore[index]
    by_address = {f"{m['kind']}/{m['metadata']['name']}": m["spec"] for m in manifests}  # type: ignore[index]
    # References as *Ref, secrets as {fromEnv}, a policy's owner by name.
    assert by_address["Connector/payments-eu"] == {  # type: ignore[comparison-overlap]
        "spaceRef": "payments", "terminationProtection": True}
    bi = by_address["BIIntegration/exec-dashboards"]
    assert bi["biA"] == {  # type: ignore[index]
        "biAApiKey": {"fromEnv": "BI_INTEGRATION_EXEC_DASHBOARDS_BIA_BIAAPIKEY"},
        "biAApiSecret": {"fromEnv": "BI_INTEGRATION_EXEC_DASHBOARDS_BIA_BIAAPISECRET"}}
    assert by_address["Policy/ledger-change-needs-ticket"]["groupName"] == \
        "payments-engineering"  # type: ignore[index]
    text = "".join(p.read_text() for p in (tmp_path / "imported").glob("*.yaml"))
    assert not any(value in text for value in populated.values())

    assert run("validate", "imported").exit_code == 0
    for variable in variables:
        monkeypatch.setenv(variable, "set-by-the-team")
    planned = run("plan", "imported", *LOCAL, "--format", "json")
    assert planned.exit_code == 0, planned.output
    summary = json.loads(planned.stdout)["summary"]
    assert summary["create"] == 0 and summary["update"] == 0
    assert summary["import"] == 41

    # Same server, same state, same folder: what its Import documents adopt is not
    # written again, and nothing is rewritten.
    before = {p.name: p.read_text() for p in (tmp_path / "imported").iterdir()}
    again = run("import", *LOCAL, "--out", "imported")
    assert again.exit_code == 0, again.output
    assert ("Nothing to import: of the objects found, 0 are recorded in the state and 41 "
            "adopted by Import documents already") in again.stdout
    assert {p.name: p.read_text() for p in (tmp_path / "imported").iterdir()} == before


def test_import_leaves_out_what_the_state_records(populated: dict[str, str],
                                                  tmp_path: Path) -> None:
    spaces = EXAMPLE_MANIFESTS / "spaces.yaml"
    adopted = run("import", *LOCAL, "--kind", "Space", "--out", "first")
    assert adopted.exit_code == 0
    assert run("apply", "first", *LOCAL, "--auto-approve").exit_code == 0
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(spaces.read_text()) if d}  # type: ignore[index]
    again = run("import", *LOCAL, "--kind", "Space", "--kind", "Connector", "--out", "second")
    assert again.exit_code == 0, again.output
    assert f"({len(names)} already recorded in the state)" in again.stdout
    kinds = {d["kind"] for d in documents(tmp_path / "second") if d["kind"] != "Import"}
    assert kinds == {"Connector"}
    # The spaces they sit in are recorded, not imported: their ids are kept.
    connectors = [d["spec"] for d in documents(tmp_path / "second") if d["kind"] == "Connector"]
    assert all("spaceRef" not in c for c in connectors)  # type: ignore[operator]
    assert any("spaceId" in c for c in connectors)  # type: ignore[operator]


def test_import_filters_by_kind_and_name(populated: dict[str, str], tmp_path: Path) -> None:
    done = run("import", *LOCAL, "--kind", "Space", "--name", "ml-*", "--out", "ml")
    assert done.exit_code == 0, done.output
    assert [d["metadata"]["name"] for d in documents(tmp_path / "ml")  # type: ignore[index]
            if d["kind"] == "Space"] == ["ml-platform"]
    for kind, why in (("Nope", "no such kind"), ("ResourceAlias", "has no List")):
        refused = run("import", *LOCAL, "--kind", kind, "--out", "x")
        assert refused.exit_code == 1 and why in refused.stderr
        assert not (tmp_path / "x").exists()
    nothing = run("import", *LOCAL, "--kind", "Space", "--name", "nope-*", "--out", "none")
    assert nothing.exit_code == 0 and "Nothing to import" in nothing.stdout
    assert not (tmp_path / "none").exists()


def test_import_needs_an_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    without_settings(monkeypatch)
    refused = run("import", "--out", "x")
    assert refused.exit_code == 1 and "Error:" in refused.stderr
    assert not (tmp_path / "x").exists()


def test_import_from_an_endpoint_without_the_reads_says_so(populated: dict[str, str],
                                                           tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVSYNC_LOCAL_OPERATIONS", "spec")
    refused = run("import", *LOCAL, "--kind", "Space", "--out", "x")
    assert refused.exit_code == 1
    assert "does not offer ListSpaces (404)" in refused.stderr, refused.stderr
    assert not (tmp_path / "x").exists()
    monkeypatch.setenv("GOVSYNC_LOCAL_OPERATIONS", "some")
    wrong = run("import", *LOCAL, "--kind", "Space", "--out", "x")
    assert wrong.exit_code == 1 and "GOVSYNC_LOCAL_OPERATIONS must be all or spec" in wrong.stderr
