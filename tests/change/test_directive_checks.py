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
