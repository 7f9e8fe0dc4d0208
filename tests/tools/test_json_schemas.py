"""The generated JSON Schemas, judged by check-jsonschema (issue 35): each is a valid
Draft 2020-12 schema, and every example manifest document passes the manifest schema
as an editor or a CI step running check-jsonschema would check it.  Offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from check_jsonschema.cli.main_command import main as check_jsonschema
from click.testing import CliRunner
from toolkit import ROOT

MANIFEST_SCHEMA = ROOT / "schemas" / "manifest.schema.json"
GENERATED = [MANIFEST_SCHEMA, *sorted((ROOT / "docs" / "json").glob("*.schema.json"))]


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(check_jsonschema, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("schema", GENERATED, ids=[p.name for p in GENERATED])
def test_every_generated_schema_is_a_valid_schema(schema: Path) -> None:
    code, output = check("--check-metaschema", str(schema))
    assert code == 0, output


def documents(folder: Path, into: Path) -> list[str]:
    """Every document of every manifest file under ``folder``, one JSON file each."""
    written = []
    for path in sorted(folder.glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                target = into / f"{path.stem}.{index}.json"
                target.write_text(json.dumps(doc))
                written.append(str(target))
    return written


def test_every_example_document_passes_the_manifest_schema(tmp_path: Path) -> None:
    files = documents(ROOT / "examples" / "manifests", tmp_path)
    assert len(files) > 12
    code, output = check("--schemafile", str(MANIFEST_SCHEMA), *files)
    assert code == 0, output


def test_a_misspelt_field_fails_the_manifest_schema(tmp_path: Path) -> None:
    doc = tmp_path / "hook.json"
    doc.write_text(json.dumps({"apiVersion": "govsync/v1", "kind": "Hook",
                               "metadata": {"name": "h"},
                               "spec": {"code": "x", "timeoutMS": 5}}))
    code, output = check("--schemafile", str(MANIFEST_SCHEMA), str(doc))
    assert code == 1 and "timeoutMS" in output, output


@pytest.mark.parametrize("key", ["hooks", "__now", "__data"])
def test_a_case_input_holding_a_key_govsync_refuses_fails_the_schema_too(
        tmp_path: Path, key: str) -> None:
    """What validate refuses at its line in a PolicyTest case's input, the schema an
    editor reads refuses as well; the same case without the key passes."""
    def test(extra: dict[str, object]) -> Path:
        doc = tmp_path / f"test{len(extra)}.json"
        doc.write_text(json.dumps({"apiVersion": "govsync/v1", "kind": "PolicyTest",
                                   "metadata": {"name": "t"}, "spec": {"policyRef": "p",
                                   "cases": [{"name": "c", "stage": "session", "expect": {},
                                              "input": {"user": {}, **extra}}]}}))
        return doc
    assert check("--schemafile", str(MANIFEST_SCHEMA), str(test({})))[0] == 0
    code, output = check("--schemafile", str(MANIFEST_SCHEMA), str(test({key: 1})))
    assert code == 1, output
