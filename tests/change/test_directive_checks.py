"""The checks a Moved and a Removed document share (one function, its messages as data):
the address it takes an object from must have no manifest left, and no other document
of its kind may take it too.  Each failure is one line naming the document and what to
do; nothing is planned."""

from __future__ import annotations

from pathlib import Path

from refreshkit import Gov, copy_examples, write


def directive(manifests_dir: Path, name: str, kind: str, spec: str) -> None:
    write(manifests_dir, f"{name}.yaml", f"""\
        apiVersion: govsync/v1
        kind: {kind}
        metadata: {{name: {name}}}
        spec: {spec}
        """)


def test_moved_and_removed_documents_share_their_source_checks(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    # The address each document takes is still defined in the manifests.
    directive(manifests, "drop-form", "Removed", "{from: Form/access-request, destroy: true}")
    directive(manifests, "move-form", "Moved", "{from: Form/access-request, "
              "to: Form/ledger-break-glass}")
    run = gov.run("plan", str(manifests))
    assert run.code == 1, run
    assert ("Removed/drop-form: Form/access-request is still defined in the manifests: "
            "remove its manifest (a Removed document ends an object whose manifest is gone)"
            ) in run.err, run
    assert ("Moved/move-form: Form/access-request is still defined in the manifests: "
            "remove it (a move keeps one object under a new address)") in run.err, run

    # Two documents of one kind take the same address.
    (manifests / "move-form.yaml").unlink()
    text = (manifests / "workflow.yaml").read_text()
    docs = text.split("\n---\n")
    (manifests / "workflow.yaml").write_text("\n---\n".join(
        d for d in docs if "name: access-request\n" not in d))
    directive(manifests, "drop-form-again", "Removed",
              "{from: Form/access-request, destroy: false}")
    run = gov.run("plan", str(manifests))
    assert run.code == 1, run
    assert ("Removed/drop-form: Form/access-request is already removed by "
            "Removed/drop-form-again: keep one"
            in run.err), run


def test_an_applied_import_is_done_and_never_stands_in_a_later_moves_way(sqlite_gov: Gov
                                                                         ) -> None:
    """Issue 43, finding 7: Import documents left after their apply are no-ops (as
    Terraform's ``import`` blocks): renaming an adopted object with a Moved document,
    its Import document pointed at the new address, plans the move and nothing else."""
    gov = sqlite_gov
    other = {"GOVSYNC_STATE": str(gov.folder / "console.db")}
    gov.run("apply", str(copy_examples(gov.folder)), "--auto-approve", env=other)
    gov.ok("import", "--kind", "Form", "--out", "imported")
    gov.ok("apply", "imported", "--auto-approve")
    form_id = gov.entries()["Form/access-request"]["id"]
    assert "No changes" in gov.ok("plan", "imported").out  # the Imports are done

    imported = gov.folder / "imported"
    for name in ("form.yaml", "imports.yaml"):
        text = (imported / name).read_text()
        (imported / name).write_text(text.replace("access-request\n", "access-request-v2\n"))
    directive(imported, "rename-form", "Moved",
              "{from: Form/access-request, to: Form/access-request-v2}")
    plan = gov.ok("plan", "imported", "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert change["action"] == "move" and change["id"] == form_id, change
    gov.ok("apply", "imported", "--auto-approve")
    assert gov.entries()["Form/access-request-v2"]["id"] == form_id
    assert "No changes" in gov.ok("plan", "imported").out  # both documents now no-ops

    # An Import that adopts another id where a Moved brings an object: one must go.
    (imported / "imports.yaml").write_text((imported / "imports.yaml").read_text().replace(
        f"id: {form_id}", "id: another-form"))
    directive(imported, "rename-form", "Moved",
              "{from: Form/access-request-v2, to: Form/access-request-v3}")
    text = (imported / "form.yaml").read_text()
    (imported / "form.yaml").write_text(text.replace("access-request-v2\n",
                                                     "access-request-v3\n"))
    text = (imported / "imports.yaml").read_text()
    (imported / "imports.yaml").write_text(text.replace("access-request-v2\n",
                                                        "access-request-v3\n"))
    run = gov.run("plan", "imported")
    assert run.code == 1, run
    assert (f"Moved/rename-form already moves an object (id {form_id}) to "
            "Form/access-request-v3: keep one") in run.err, run


def test_validate_rejects_an_import_or_moved_whose_target_no_manifest_defines(
        sqlite_gov: Gov) -> None:
    """Issue 43, finding 7: one check, in the loader, for validate and plan alike, at the
    directive's spec.to."""
    gov = sqlite_gov
    manifests = copy_examples(gov.folder)
    write(manifests, "adopt.yaml", """\
        apiVersion: govsync/v1
        kind: Import
        metadata: {name: adopt-form}
        spec: {to: Form/acces-request-v2, id: "123"}
        ---
        apiVersion: govsync/v1
        kind: Moved
        metadata: {name: move-hook}
        spec: {from: Hook/old, to: Hook/nowhere}
        """)
    adopt = "manifests/adopt.yaml"
    for command in ("validate", "plan"):
        run = gov.run(command, str(manifests))
        assert run.code == 1, run
        assert (f"{adopt}:4:12: Import/adopt-form: no manifest defines Form/acces-request-v2 "
                "(did you mean Form/access-request?): add the manifest of the object it "
                "adopts (or remove the Import document once it is applied)") in run.err, run
        assert (f"{adopt}:9:28: Moved/move-hook: no manifest defines Hook/nowhere: add the "
                "object's manifest under its new address") in run.err, run
