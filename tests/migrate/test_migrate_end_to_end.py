"""From a Terraform state to govsync managing the same objects, none created twice.

The organisation of ``organisation.py`` is created on the reference server
through the API, as Terraform would have; its state points at their ids.
Then, as a team would: ``migrate``, ``validate``, ``plan`` (imports only),
``apply`` (no object created, every id adopted), ``plan`` (no changes), and
``migrate`` again (nothing rewritten).  No secret value of the state is in
the folder, in anything printed, or in govsync's state.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from migratekit import EXAMPLE_SEED, Api, Govsync, Server
from organisation import ADOPTED, KEPT, VARIABLES, build

pytestmark = pytest.mark.slow


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def counts(server: Server) -> dict[str, int]:
    return {kind: len(objects) for kind, objects in server.objects().items()}


def test_a_terraform_state_moves_to_govsync_without_creating_anything(tmp_path: Path) -> None:
    server = Server(tmp_path, "server", seed=EXAMPLE_SEED).start()
    try:
        api = Api(server.url)
        org = build(api)
        tfstate = org.state.write(tmp_path / "terraform.tfstate")
        gov = Govsync(tmp_path, str(tmp_path / ".govsync" / "state.db"), "default", server.url,
                      dict(org.environ))
        out = tmp_path / "governance"

        migrated = gov.run("migrate", "terraform", str(tfstate), "--out", str(out),
                           "--owner-group", "data-platform")
        assert migrated.code == 0, migrated
        assert f"Migrated {len(ADOPTED)} of {len(ADOPTED) + len(KEPT)}" in migrated.out
        for variable in VARIABLES.values():
            assert variable in migrated.out
        report = (out / "MIGRATION.md").read_text()
        for address in KEPT:
            assert f"`{address}`" in report
        assert "govsync's NativeUser is made by CreateNativeUserV3" in report
        for variable in VARIABLES.values():
            assert f"`{variable}`" in report
        script = (out / "terraform-state-rm.sh").read_text()
        removed = [line.strip().rstrip(" \\").strip("'") for line in script.splitlines()
                   if line.startswith("  '")]
        assert sorted(removed) == sorted(ADOPTED.values())

        validated = gov.run("validate", str(out))
        assert validated.code == 0, validated

        before = counts(server)
        plan = gov.plan_json(str(out))
        assert plan["summary"]["create"] == 0, plan
        assert plan["summary"]["import"] == len(ADOPTED), plan
        assert {c["address"] for c in plan["changes"]} == set(ADOPTED)

        applied = gov.run("apply", str(out), "--auto-approve")
        assert applied.code == 0, applied
        assert counts(server) == before, "an apply after a migration created objects"
        entries = gov.entries()
        assert {a: e["id"] for a, e in entries.items()} == org.ids
        # The replace-all kinds were sent once: the AI provider's key is the variable's
        # value (not {"fromEnv": ...}), the hooks are as Terraform made them.
        (provider,) = server.objects()["ConnectorAIProvider"]
        assert provider["config"] == {"providerG": {"apiKey": org.canaries["assistant"]}}
        hooks = {h["name"]: h for h in server.objects()["Hook"]}
        assert hooks["risk_score"]["allowlistedNetworkHosts"] == ["risk.internal"]
        assert hooks["risk_score"]["timeoutMs"] == 2500

        again = gov.run("plan", str(out), "--detailed-exitcode")
        assert again.code == 0, again
        assert "No changes" in again.out + again.err

        # Run again over its own output: nothing rewritten.
        written = digests(out)
        rerun = gov.run("migrate", "terraform", str(tfstate), "--out", str(out),
                        "--owner-group", "data-platform")
        assert rerun.code == 0, rerun
        assert "Nothing changed" in rerun.err
        assert digests(out) == written

        # No secret of the state anywhere govsync wrote or printed.
        written_text = "".join(p.read_text(errors="replace") for p in out.iterdir())
        printed = "".join(gov.transcript)
        stored = "".join(p.read_bytes().decode("latin-1")
                         for p in (tmp_path / ".govsync").iterdir() if p.is_file())
        for name, value in org.canaries.items():
            assert value in tfstate.read_text() or name in ("assistant", "jamf")
            for where, text in (("the folder", written_text), ("the output", printed),
                                ("govsync's state", stored)):
                assert value not in text, f"the {name} secret is in {where}"
        assert "hmac-sha256:" in stored  # the secrets are there as fingerprints
    finally:
        server.stop()


def test_the_manifests_read_as_terraform_had_them(tmp_path: Path) -> None:
    """Each kind's fields, references, secrets and policy owners across schema versions."""
    server = Server(tmp_path, "server", seed=EXAMPLE_SEED).start()
    try:
        org = build(Api(server.url))
    finally:
        server.stop()
    tfstate = org.state.write(tmp_path / "terraform.tfstate")
    gov = Govsync(tmp_path, str(tmp_path / "state.db"), "default", None)
    out = tmp_path / "out"
    assert gov.invoke("migrate", "terraform", str(tfstate), "--out", str(out)).code == 0

    docs = {f"{d['kind']}/{d['metadata']['name']}": d["spec"]
            for f in sorted(out.glob("*.yaml")) if f.name != "imports.yaml"
            for d in yaml.safe_load_all(f.read_text())}
    assert set(docs) == set(ADOPTED)
    assert docs["Connector/eu-main"] == {"spaceRef": "analytics", "terminationProtection": True}
    assert docs["Connector/edge-0"] == {"terminationProtection": False}
    assert docs["Policy/legacy-v0"]["groupName"] == "security"        # owners[0], version 0
    assert docs["Policy/legacy-v0"]["status"] == "active"             # from active: true
    assert docs["Policy/owned-v1"]["userEmail"] == "alice.martin@northwind.example"
    assert docs["Policy/owned-v1"]["notification"] == "owners"
    assert docs["Policy/current-v2"]["groupName"] == ""               # left to the user
    assert docs["LogIntegration/siem"]["logStoreD"] == {
        "host": "splunk.example", "port": 8088,
        "accessToken": {"fromEnv": VARIABLES["siem"]}}
    assert docs["MDMIntegration/jamf"]["mdmB"]["apiKey"] == {"fromEnv": VARIABLES["jamf"]}
    assert docs["ConnectorAIProvider/region.eu.assistant"] == {
        "connectorRef": "eu-main",
        "config": {"providerG": {"apiKey": {"fromEnv": VARIABLES["assistant"]}}}}
    # The native user stays in Terraform: the data discovery names it by id.
    assert docs["DataDiscoveryConfiguration/orders"]["nativeUserId"] == org.native_user
    assert docs["Permission/read-orders"]["code"] == "package p\nallow := true"
    assert docs["Form/access-request"]["fields"][1]["config"]["optionsSource"]["input"] == {
        "limit": 10, "tags": ["prod"]}
    assert docs["SidecarResourceLink/legacy_orders"] == {"id": "srl-orders-db",
                                                         "terminationProtection": False}
    imports = list(yaml.safe_load_all((out / "imports.yaml").read_text()))
    assert {i["spec"]["to"]: i["spec"]["id"] for i in imports} == org.ids
    assert {i["metadata"]["name"] for i in imports} == set(ADOPTED.values())
    # The owner left empty is the one error `govsync validate` reports, at its line.
    run = gov.invoke("validate", str(out))
    assert run.code == 1
    (error,) = [line for line in run.err.splitlines() if ": spec." in line]
    assert error.startswith(str(out / "policy.yaml")) and "spec.groupName" in error
    line = int(error.split(":")[1])
    assert (out / "policy.yaml").read_text().splitlines()[line - 1].startswith(
        '  groupName: ""  # the owner')
    assert json.loads((out / ".govsync-migrate.json").read_text())["formatVersion"] == "1.0"
