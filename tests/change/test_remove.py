"""Delete and forget, reviewed (contract section 12): ``kind: Removed`` documents and
``prune: true``; deletes after every other change, dependants first; protection in two
steps; what the server refuses; against the embedded reference server, SQLite and
PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from refreshkit import Gov, copy_examples, write

from govsync.api.kinds import BY_KIND
from govsync.plan import Action, Change, Plan
from govsync.planfile import review_digest
from testkit import EXAMPLE_MANIFESTS, EXAMPLE_SEED, serve, stop

KEY = "spec-only-key"


def applied(gov: Gov) -> Path:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    return manifests


def drop(manifests: Path, kind: str, name: str) -> dict[str, Any]:
    """Remove one document from the manifests; returns it."""
    for path in sorted(manifests.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        kept = [d for d in docs if not (d["kind"] == kind and d["metadata"]["name"] == name)]
        if len(kept) != len(docs):
            path.write_text(yaml.safe_dump_all(kept, sort_keys=False))
            return next(d for d in docs if d not in kept)
    raise AssertionError(f"no {kind}/{name}")


def set_field(manifests: Path, kind: str, name: str, **fields: Any) -> None:
    for path in sorted(manifests.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for d in docs:
            if d["kind"] == kind and d["metadata"]["name"] == name:
                d["spec"].update(fields)
                path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
                return
    raise AssertionError(f"no {kind}/{name}")


def removed(manifests: Path, address: str, destroy: bool) -> None:
    name = address.replace("/", "-").lower()
    write(manifests, f"removed-{name}.yaml", f"""\
        apiVersion: govsync/v1
        kind: Removed
        metadata: {{name: {name}}}
        spec: {{from: {address}, destroy: {str(destroy).lower()}}}
        """)


def ids_of(gov: Gov, kind: str) -> set[str]:
    id_field = BY_KIND[kind].create.id_field
    return {o.get(id_field, o.get("id")) for o in gov.objects(kind)}


def test_removed_destroy_deletes_after_review_and_forget_keeps(gov: Gov) -> None:
    manifests = applied(gov)
    entries = gov.entries()
    form_id, label_id = entries["Form/access-request"]["id"], entries["DataLabel/iban"]["id"]
    drop(manifests, "Form", "access-request")
    drop(manifests, "DataLabel", "iban")
    # Without a Removed document: orphans, nothing deleted.
    plan = gov.ok("plan", str(manifests), "--format", "json").json()
    assert plan["summary"]["orphan"] == 2 and plan["summary"]["delete"] == 0
    removed(manifests, "Form/access-request", True)
    removed(manifests, "DataLabel/iban", False)
    plan = gov.ok("plan", str(manifests), "--format", "json").json()
    actions = {c["address"]: c["action"] for c in plan["changes"] if c["action"] != "no-op"}
    assert actions == {"Form/access-request": "delete", "DataLabel/iban": "forget"}
    assert plan["summary"]["delete"] == 1 and plan["summary"]["forget"] == 1
    text = gov.ok("plan", str(manifests)).out
    assert "x Form/access-request  (delete)" in text and "/ DataLabel/iban  (forget)" in text
    assert "1 to delete" in text and "1 to forget" in text
    # The pull request's comment: the delete open (never collapsed) in a diff block, its
    # line starting with "-", which GitHub colours red; the forget stays in its kind's.
    markdown = gov.ok("plan", str(manifests), "--format", "markdown").out
    before, _, deletes = markdown.partition("#### 1 to delete (after every other change)")
    block = deletes.split("```diff\n", 1)[1].split("```", 1)[0]
    assert block.splitlines()[0] == "- Form/access-request (delete)", markdown
    assert before.count("<details>") == before.count("</details>")  # not inside one
    assert "x Form/access-request" not in markdown
    assert "<summary><b>Form</b>" not in markdown
    assert "/ DataLabel/iban (forget)" in markdown
    gov.ok("apply", str(manifests), "--auto-approve")
    assert form_id not in ids_of(gov, "Form")
    assert label_id in ids_of(gov, "DataLabel")
    assert {"Form/access-request", "DataLabel/iban"}.isdisjoint(gov.entries())
    again = gov.ok("plan", str(manifests), "--detailed-exitcode")
    assert "No changes" in again.out


ML = ("Connector/ml-gateway-us", "Satellite/ai-analytics", "Space/ml-platform")


def remove_ml(manifests: Path) -> None:
    for address in ML:
        kind, name = address.split("/")
        drop(manifests, kind, name)
        removed(manifests, address, True)


def test_protection_takes_two_reviewed_steps_and_dependants_go_first(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    set_field(manifests, "Space", "ml-platform", terminationProtection=True)
    set_field(manifests, "Connector", "ml-gateway-us", terminationProtection=False)
    set_field(manifests, "Satellite", "ai-analytics", terminationProtection=False)
    gov.ok("apply", str(manifests), "--auto-approve")
    space_id = gov.entries()["Space/ml-platform"]["id"]
    saved = {p.name: p.read_text() for p in manifests.glob("*.yaml")}
    remove_ml(manifests)
    plan = gov.run("plan", str(manifests), "--format", "json").json()
    space = next(c for c in plan["changes"] if c["address"] == "Space/ml-platform")
    assert space["action"] == "blocked", space
    assert "terminationProtection is true" in space["reason"]
    assert "terminationProtection: false" in space["reason"]
    refused = gov.run("apply", str(manifests), "--auto-approve")
    assert refused.code == 1 and space_id in ids_of(gov, "Space")
    # Step one, reviewed: protection off through the manifest.
    for path in manifests.glob("removed-*.yaml"):
        path.unlink()
    for name, text in saved.items():
        (manifests / name).write_text(text)
    set_field(manifests, "Space", "ml-platform", terminationProtection=False)
    gov.ok("apply", str(manifests), "--auto-approve")
    # Step two, reviewed: the deletes, dependants before the space they are in.
    remove_ml(manifests)
    plan = gov.ok("plan", str(manifests), "--format", "json", "-v").json()
    changes = {c["address"]: c for c in plan["changes"] if c["action"] != "no-op"}
    assert {a: c["action"] for a, c in changes.items()} == dict.fromkeys(ML, "delete")
    run = gov.ok("apply", str(manifests), "--auto-approve")
    order = [line.split(":")[0] for line in run.err.splitlines() if "delete applied" in line]
    assert order.index("Space/ml-platform") == 2, run
    assert space_id not in ids_of(gov, "Space")
    assert not set(ML) & set(gov.entries())


def test_a_delete_of_an_object_still_referred_to_is_blocked_by_name(gov: Gov) -> None:
    """The connector refers to its space by id in state: removing only the space is
    caught in the plan, naming the connector; nothing is sent."""
    manifests = applied(gov)
    set_field(manifests, "Connector", "ml-gateway-us",
              spaceId=gov.entries()["Space/ml-platform"]["id"])
    path = next(p for p in manifests.glob("*.yaml") if "spaceRef: ml-platform" in p.read_text())
    text = path.read_text()
    path.write_text(text)
    drop(manifests, "Satellite", "ai-analytics")
    removed(manifests, "Satellite/ai-analytics", True)
    drop(manifests, "Space", "ml-platform")
    removed(manifests, "Space/ml-platform", True)
    doc = manifests / "connectors.yaml"
    docs = [d for d in yaml.safe_load_all(doc.read_text()) if d]
    for d in docs:
        if d["metadata"]["name"] == "ml-gateway-us":
            d["spec"].pop("spaceRef", None)
    doc.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    run = gov.run("plan", str(manifests), "--format", "json")
    assert run.code == 1, run
    space = next(c for c in run.json()["changes"] if c["address"] == "Space/ml-platform")
    assert space["action"] == "blocked"
    assert "still referred to by Connector/ml-gateway-us (spaceId)" in space["reason"]


def test_prune_turns_every_orphan_into_a_delete(gov: Gov) -> None:
    manifests = applied(gov)
    query_id = gov.entries()["LogQuery/blocked-ledger-writes"]["id"]
    drop(manifests, "LogQuery", "blocked-ledger-writes")
    write(gov.folder, "govsync.yaml", f"""\
        apiVersion: govsync/v1
        kind: Project
        paths: [{manifests}]
        prune: true
        """)
    plan = gov.ok("plan", "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert (change["address"], change["action"]) == ("LogQuery/blocked-ledger-writes", "delete")
    assert "prune: true" in change["reason"]
    gov.ok("apply", "--auto-approve")
    assert query_id not in ids_of(gov, "LogQuery")


@pytest.fixture
def spec_only(sqlite_gov: Gov) -> Iterator[Gov]:
    """An endpoint with the spec's operations only (a real process: `serve` in spec mode)."""
    proc, url = serve(["--operations", "spec", "--api-key", KEY, "--seed", str(EXAMPLE_SEED),
                       "--db", str(sqlite_gov.folder / "spec-only.db")], key=KEY)
    try:
        yield dataclasses.replace(sqlite_gov, env={**sqlite_gov.env, "GOVSYNC_ENDPOINT": url,
                                                   "GOVSYNC_API_KEY": KEY})
    finally:
        stop(proc)


def test_spec_only_endpoint_refuses_deletes_in_the_plan_and_forget_orphans_works(
        spec_only: Gov) -> None:
    gov = spec_only
    manifests = applied(gov)
    drop(manifests, "Form", "access-request")
    removed(manifests, "Form/access-request", True)
    run = gov.run("plan", str(manifests))
    assert run.code == 1, run
    assert "this endpoint does not offer the deletes" in run.out
    # An update only api-lifecycle.md lists is refused in the plan too; the spec's own
    # (UpdateHook) is sent as before.
    (manifests / "removed-form-access-request.yaml").unlink()
    set_field(manifests, "Space", "analytics", description="changed")
    run = gov.run("plan", str(manifests))
    assert run.code == 1 and "does not offer UpdateSpaceV2" in run.out, run
    set_field(manifests, "Space", "analytics", description=next(
        d for d in yaml.safe_load_all((EXAMPLE_MANIFESTS / "spaces.yaml").read_text())
        if d and d["metadata"]["name"] == "analytics")["spec"]["description"])
    gov.ok("apply", str(manifests), "--auto-approve", "--forget-orphans")
    assert "Form/access-request" not in gov.entries()


def test_rules_see_deletes_and_the_review_digest_signs_them(gov: Gov) -> None:
    """A rule on change.action refuses a delete in prod-like fashion; the digest that
    approvers sign differs between a plan with the delete and one without."""
    manifests = applied(gov)
    drop(manifests, "Form", "access-request")
    removed(manifests, "Form/access-request", True)
    write(gov.folder, "govsync.yaml", f"""\
        apiVersion: govsync/v1
        kind: Project
        paths: [{manifests}]
        rules:
          - name: no-form-deletes
            match: {{kinds: [Form]}}
            expression: "change.action != 'delete'"
            message: "forms are archived, not deleted"
        """)
    run = gov.run("plan")
    assert run.code == 1 and "forms are archived, not deleted" in run.err, run
    refused = gov.run("apply", "--auto-approve")
    assert refused.code == 1 and "Form/access-request" in gov.entries()
    # Forgetting is another action, which the rule lets through.
    removed(manifests, "Form/access-request", False)
    gov.ok("apply", "--auto-approve")
    assert "Form/access-request" not in gov.entries()
    history = gov.ok("audit", "export", "--format", "json").out
    assert '"forget"' in history

    base = Plan("w", "l", 1, "d", [], id="p")
    deleting = Plan("w", "l", 1, "d", [Change("Form/a", Action.DELETE, "Form", id="form-1",
                                              operation="DeleteForm")], id="p")
    forgetting = Plan("w", "l", 1, "d", [Change("Form/a", Action.FORGET, "Form",
                                                id="form-1")], id="p")
    assert len({review_digest(base), review_digest(deleting), review_digest(forgetting)}) == 3


def test_a_saved_plan_with_a_delete_and_a_replace_applies_exactly_them(gov: Gov) -> None:
    manifests = applied(gov)
    form_id = gov.entries()["Form/access-request"]["id"]
    label_id = gov.entries()["DataLabel/iban"]["id"]
    drop(manifests, "Form", "access-request")
    removed(manifests, "Form/access-request", True)
    gov.ok("plan", str(manifests), "--replace", "DataLabel/iban", "--out", "p.json")
    run = gov.ok("apply", "p.json", "--auto-approve")
    assert "Form/access-request: delete applied" in run.err, run
    assert form_id not in ids_of(gov, "Form")
    assert gov.entries()["DataLabel/iban"]["id"] != label_id
    assert label_id not in ids_of(gov, "DataLabel")
