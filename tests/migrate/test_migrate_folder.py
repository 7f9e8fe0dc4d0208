"""The folder migrate writes: whole or not at all, its own or refused, names that hold.

Running it again over its own output changes nothing; over a newer state it
rewrites what changed and removes what is gone; a folder it did not write,
or a file changed since, is refused with nothing written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from migratekit import Govsync, Run, TerraformState, instance

# Strings that YAML reads in more ways than one, or cannot write plain.
AWKWARD = ["yes", "No", "null", "~", "1e3", "0x1F", "12:30", "2024-01-31", "a: b", "a #b",
           "# c", "- d", "@e", "`f`", "'g'", '"h"', "ends:", " lead", "trail ", "", ".5",
           "multi\nline\n", "no end\nnewline", "  indented\nfirst\n", "blank\n\nlines\n\n\n",
           "tab\there", "\ttab first\n", "ü 中 😀", "sep\u2028arator", "nul\x00", "cr\r\nlf",
           "spaces \n  \nonly", "{x: 1}", "[1]", "!tag", "&anchor", "*alias", "%dir", "|", ">",
           "nb\xa0sp", "soft\xadhyphen", "zero\u200bwidth", "ctl\x01\x7f", "bom\ufeff", "\x85"]


def space(name: str, description: str = "") -> dict[str, Any]:
    return {"id": f"space-{name}", "name": name, "description": description,
            "created_at": 1, "termination_protection": False}


def state_of(*names: str) -> TerraformState:
    state = TerraformState()
    for name in names:
        state.add("formal_space", name, instance(space(name), schema_version=1))
    return state


@pytest.fixture
def migrate(tmp_path: Path) -> Callable[..., Run]:
    gov = Govsync(tmp_path, str(tmp_path / "state.db"), "default", None)

    def run(state: TerraformState, *args: str, out: Path | None = None) -> Run:
        source = state.write(tmp_path / "terraform.tfstate")
        return gov.invoke("migrate", "terraform", str(source), "--out",
                          str(out or tmp_path / "out"), *args)
    return run


def contents(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_second_run_changes_nothing_and_a_newer_state_only_what_changed(
        migrate: Callable[..., Run], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert migrate(state_of("a", "b")).code == 0
    first = contents(out)
    assert set(first) == {".govsync-migrate.json", "MIGRATION.md", "imports.yaml", "space.yaml",
                          "terraform-state-rm.sh"}
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = migrate(state_of("a", "b"))
    assert again.code == 0 and "Nothing changed" in again.err, again
    assert contents(out) == first
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == mtimes

    # A newer state: a connector more, a space less.
    newer = state_of("a")
    newer.add("formal_connector", "c", instance({
        "id": "conn-1", "name": "c-1", "api_key": "k", "termination_protection": False,
        "space_id": "space-a"}, schema_version=1))
    assert migrate(newer).code == 0
    after = contents(out)
    assert set(after) == set(first) | {"connector.yaml"}
    assert after["space.yaml"] != first["space.yaml"]
    record = json.loads((out / ".govsync-migrate.json").read_text())
    assert set(record["files"]) == set(after) - {".govsync-migrate.json"}
    (connector,) = yaml.safe_load_all((out / "connector.yaml").read_text())
    assert connector["spec"] == {"spaceRef": "a", "terminationProtection": False}
    # And back: the connector's file, which this wrote, is removed.
    assert migrate(state_of("a")).code == 0
    assert "connector.yaml" not in contents(out)


def test_a_folder_it_did_not_write_is_refused(migrate: Callable[..., Run],
                                              tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "hooks.yaml").write_text("kept: true\n")
    run = migrate(state_of("a"), out=mine)
    assert run.code == 1
    assert "not empty, and not a folder govsync migrate wrote" in run.err
    assert [p.name for p in mine.iterdir()] == ["hooks.yaml"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "exists and is not a folder" in migrate(state_of("a"), out=a_file).err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert migrate(state_of("a"), out=empty).code == 0
    assert (empty / "space.yaml").is_file()


def test_a_file_changed_since_is_refused_and_an_added_one_left_alone(
        migrate: Callable[..., Run], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert migrate(state_of("a")).code == 0
    (out / "govsync.yaml").write_text("apiVersion: govsync/v1\nkind: Project\n")
    (out / "space.yaml").write_text((out / "space.yaml").read_text() + "# reviewed\n")
    before = contents(out)
    run = migrate(state_of("a", "b"))
    assert run.code == 1
    assert f"{out / 'space.yaml'}: changed since govsync migrate wrote it" in run.err
    assert "nothing was written" in run.err
    assert contents(out) == before
    # Without the edit, the update goes through and the project file stays.
    (out / "space.yaml").write_text((out / "space.yaml").read_text().replace("# reviewed\n", ""))
    assert migrate(state_of("a", "b")).code == 0
    assert (out / "govsync.yaml").read_text().startswith("apiVersion")
    assert "b" in (out / "space.yaml").read_text()


def test_names_are_unique_or_the_objects_stay_in_terraform(migrate: Callable[..., Run],
                                                            tmp_path: Path) -> None:
    state = state_of("a")
    # Two spaces named alike in the API: govsync cannot address both.
    state.add("formal_space", "again", instance({**space("a"), "id": "space-a2"},
                                                schema_version=1))
    # Unnamed kinds: names from the address; keys that would meet get a digest.
    providers = []
    for key in ("eu west", "eu-west", "eu/west"):
        providers.append(instance({
            "id": f"cai-{key}", "connector_id": "conn-1", "formal_ai_satellite": [{}],
            "gemini": [], "google_vertex_ai": [], "anthropic": [], "aws_bedrock": [],
            "openai": [], "azure_ai": []}, key=key))
    state.add("formal_connector_ai_provider", "ai", *providers, module="module.team[0]")
    run = migrate(state)
    assert run.code == 0, run
    out = tmp_path / "out"
    report = (out / "MIGRATION.md").read_text()
    assert "| `formal_space.again` | formal_space.analytics" not in report
    assert "`formal_space.a` | formal_space.again has the same name" in report
    assert "`formal_space.again` | formal_space.a has the same name" in report
    names = sorted(d["metadata"]["name"] for d in
                   yaml.safe_load_all((out / "connector-ai-provider.yaml").read_text()))
    assert len(names) == 3 and len(set(names)) == 3
    assert "team.0.ai.eu-west" in names  # the one that needed no change keeps its name
    assert all(n.startswith("team.0.ai.eu") for n in names)
    assert all(d["spec"]["config"] == {"providerD": {}} for d in
               yaml.safe_load_all((out / "connector-ai-provider.yaml").read_text()))


def test_every_string_reads_back_as_it_was(migrate: Callable[..., Run], tmp_path: Path) -> None:
    state = TerraformState()
    for i, text in enumerate(AWKWARD):
        state.add("formal_space", f"s{i}", instance(space(f"s{i}", text), schema_version=1))
    awkward_name = "ü:yes # \"x\""
    state.add("formal_space", "named", instance(space(awkward_name), schema_version=1))
    run = migrate(state)
    assert run.code == 0, run
    out = tmp_path / "out"
    docs = {d["metadata"]["name"]: d["spec"] for d in
            yaml.safe_load_all((out / "space.yaml").read_text())}
    assert {docs[f"s{i}"].get("description", "") for i in range(len(AWKWARD))} == set(AWKWARD)
    for i, text in enumerate(AWKWARD):
        assert docs[f"s{i}"]["description"] == text, text
    assert awkward_name in docs
    gov = Govsync(tmp_path, str(tmp_path / "state.db"), "default", None)
    assert gov.invoke("validate", str(out)).code == 0
    assert gov.invoke("fmt", "--check", str(out)).code == 0
