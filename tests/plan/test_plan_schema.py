"""`govsync schema --check`: the committed schemas/ are what the models generate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from plan_helpers import ROOT, Gov

SCHEMAS = ROOT / "schemas"
FILES = ("manifest.schema.json", "openapi.json")


def test_committed_schemas_are_current(gov: Gov) -> None:
    assert sorted(p.name for p in SCHEMAS.iterdir()) == sorted(FILES)
    result = gov.run("schema", "--check", "--out", SCHEMAS)
    assert result.stderr == "Schemas are current.\n"


def test_check_fails_on_a_modified_copy_and_leaves_it_alone(gov: Gov, workdir: Path) -> None:
    copy = Path(shutil.copytree(SCHEMAS, workdir / "schemas"))
    manifest = copy / "manifest.schema.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["title"] = "edited by hand"
    edited = json.dumps(data, indent=2) + "\n"
    manifest.write_text(edited, encoding="utf-8")

    result = gov.run("schema", "--check", "--out", copy, code=1)
    assert result.stderr == "Stale: manifest.schema.json (run `govsync schema`)\n"
    assert manifest.read_text(encoding="utf-8") == edited, "--check must not write"
    assert (copy / "openapi.json").read_bytes() == (SCHEMAS / "openapi.json").read_bytes()


def test_check_fails_on_a_missing_file(gov: Gov, workdir: Path) -> None:
    copy = Path(shutil.copytree(SCHEMAS, workdir / "schemas"))
    (copy / "openapi.json").unlink()
    result = gov.run("schema", "--check", "--out", copy, code=1)
    assert result.stderr == "Stale: openapi.json (run `govsync schema`)\n"
    assert not (copy / "openapi.json").exists()


def test_schema_writes_what_check_accepts(gov: Gov, workdir: Path) -> None:
    out = workdir / "fresh"
    gov.run("schema", "--out", out)
    for name in FILES:
        assert (out / name).read_bytes() == (SCHEMAS / name).read_bytes()
    gov.run("schema", "--check", "--out", out)
