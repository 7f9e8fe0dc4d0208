"""Renames (contract section 12): a ``Moved`` to a new API name is an update where the
kind's update covers ``name``; blocked only where it does not."""

from __future__ import annotations

from pathlib import Path

import yaml
from refreshkit import Gov, copy_examples, write


def rename(manifests: Path, kind: str, old: str, new: str) -> None:
    for path in sorted(manifests.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for d in docs:
            if d["kind"] == kind and d["metadata"]["name"] == old:
                d["metadata"]["name"] = new
                path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
                write(manifests, f"moved-{old}.yaml", f"""\
                    apiVersion: govsync/v1
                    kind: Moved
                    metadata: {{name: rename-{old}}}
                    spec: {{from: {kind}/{old}, to: {kind}/{new}}}
                    """)
                return
    raise AssertionError(f"no {kind}/{old}")


def test_a_moved_form_is_renamed_in_place(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    form_id = gov.entries()["Form/access-request"]["id"]
    rename(manifests, "Form", "access-request", "access-request-v2")
    plan = gov.ok("plan", str(manifests), "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert change["action"] == "move" and change["movedFrom"] == "Form/access-request"
    assert change["fields"] == ["name"] and change["id"] == form_id
    gov.ok("apply", str(manifests), "--auto-approve")
    (form,) = [f for f in gov.objects("Form") if f["id"] == form_id]
    assert form["name"] == "access-request-v2"
    assert len(gov.objects("Form")) == 2  # renamed, not created again
    assert gov.entries()["Form/access-request-v2"]["id"] == form_id
    assert "No changes" in gov.ok("plan", str(manifests)).out


def test_a_moved_signing_key_whose_name_cannot_change_is_blocked(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    rename(manifests, "SigningKey", "release-pipeline", "release-pipeline-2")
    run = gov.run("plan", str(manifests))
    assert run.code == 1
    assert "UpdateSigningKey cannot change it" in run.out
    assert "--replace SigningKey/release-pipeline" in run.out
