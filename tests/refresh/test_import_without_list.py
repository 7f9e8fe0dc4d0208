"""``govsync import`` reads the kinds without a List where it can (a connector's AI
provider, by a Get per connector) and names, each with why, the kinds nothing finds."""

from __future__ import annotations

from pathlib import Path

import yaml
from refreshkit import Gov, copy_examples
from refreshkit import lost as lost_state

from govsync.adoption import findable, unfindable_reason
from govsync.api.kinds import BY_KIND, KINDS


def test_kinds_without_a_list_are_read_where_a_get_can_find_them(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    provider_id = next(e["id"] for e in gov.entries().values()
                       if e["kind"] == "ConnectorAIProvider")
    lost = lost_state(gov)  # SQLite: a new state file
    done = lost.ok("import", "--out", "imported")
    # Not listed, found by its connector: a manifest and an Import document.
    text = (Path(gov.folder) / "imported" / "connector-ai-provider.yaml").read_text()
    (doc,) = [d for d in yaml.safe_load_all(text) if d]
    assert doc["kind"] == "ConnectorAIProvider" and "connectorRef" in doc["spec"]
    # Named after its connector (issue 43, finding 8), not after its id.
    assert doc["metadata"]["name"] == doc["spec"]["connectorRef"] == "prod-eu", doc
    imports = (Path(gov.folder) / "imported" / "imports.yaml").read_text()
    assert f"id: {provider_id}" in imports
    # Every kind nothing finds is named, with why, on stderr.
    unfound = [k.name for k in KINDS if not findable(k)]
    assert unfound == ["ResourceAlias", "PolicyReport", "SessionTermination", "BlockedUser"]
    for name in unfound:
        assert f"Not read: {name}: {unfindable_reason(BY_KIND[name])}" in done.err
    assert "GetPolicyReport needs the id of one, which nothing lists" in done.err
    # Asked for by name: refused, with the same reason.
    refused = lost.run("import", "--kind", "PolicyReport", "--out", "x")
    assert refused.code == 1 and "nothing lists" in refused.err
    # The import adopts the provider: nothing created, nothing sent.
    variables = done.out.split("before planning: ")[1].split()
    run = lost.run("plan", "imported", "--format", "json",
                   env={v.strip(","): "set-by-the-team" for v in variables})
    assert run.code == 0, run
    plan = run.json()
    (change,) = [c for c in plan["changes"] if c["kind"] == "ConnectorAIProvider"]
    assert change["action"] == "import" and change["id"] == provider_id, change
    assert plan["summary"]["create"] == 0 and plan["summary"]["update"] == 0
