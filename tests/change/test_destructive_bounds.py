"""Delete and replace only what is ours, exactly once (issue 41): each finding of the
attacker's round reproduced from outside, through the command line against the real
reference server (a fault proxy in front of it where an answer must lie, lag or never
come)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner
from refreshkit import Gov, copy_examples, write

from faultkit import KEY, FaultServer, drop_before, endless, huge, omit_once
from govsync.api.catalog import BY_NAME
from govsync.cli import cli


def named(gov: Gov, kind: str, name: str) -> list[dict[str, Any]]:
    return [o for o in gov.objects(kind) if o.get("name") == name]


def changes(run: Any) -> dict[str, dict[str, Any]]:
    return {c["address"]: c for c in run.json()["changes"]}


# -- 3: a replace is blocked where a delete would be ------------------------------------


def test_replace_of_a_protected_object_is_blocked_and_sends_nothing(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    for address in ("Connector/prod-eu", "SigningKey/change-approvals-2024"):
        run = gov.run("plan", manifests, "--replace", address, "--format", "json")
        assert run.code == 1, run
        change = changes(run)[address]
        assert change["action"] == "blocked", change
        assert change["why"] == {"why": "protected", "by": "--replace",
                                 "detail": "in state"}, change
        assert "terminationProtection is true" in change["reason"]
        applied = gov.run("apply", manifests, "--auto-approve", "--replace", address)
        assert applied.code == 1 and "nothing was applied" in applied.err, applied
    assert len(named(gov, "Connector", "prod-eu")) == 1
    assert len(named(gov, "SigningKey", "change-approvals-2024")) == 1
    assert "No changes" in gov.ok("plan", manifests).out


# -- 5: an existence check keyed on the live object, not on the address ---------------


def test_a_console_remade_object_is_not_created_beside_it(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    recorded = gov.entries()["Hook/risk_score"]["id"]
    (hook,) = named(gov, "Hook", "risk_score")
    gov.call("DeleteHook", {"id": recorded})
    made = gov.call("CreateHook", {k: v for k, v in hook.items()
                                   if k not in ("id", "createdAt", "updatedAt")})
    remade = made["hook"]["id"]
    run = gov.run("plan", manifests, "--format", "json")
    assert run.code == 1, run
    change = changes(run)["Hook/risk_score"]
    assert (change["action"], change["id"]) == ("blocked", remade), change
    assert change["why"] == {"why": "exists-unrecorded", "id": remade, "detail": recorded}
    assert gov.run("apply", manifests, "--auto-approve").code == 1
    assert [h["id"] for h in named(gov, "Hook", "risk_score")] == [remade]


# -- 6: missing decided by a second, independent read --------------------------------------


def test_a_list_that_leaves_an_object_out_once_makes_no_second_one(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = str(copy_examples(gov.folder))
    with FaultServer(gov) as server:
        assert gov.run("apply", manifests, "--auto-approve", env=server.env).code == 0
        key = gov.entries()["SigningKey/release-pipeline"]["id"]
        server.rules["ListSigningKeys"] = omit_once("signingKeys", key)
        run = gov.run("plan", manifests, "--format", "json", env=server.env)
        assert run.code == 0, run
        assert changes(run)["SigningKey/release-pipeline"]["action"] == "no-op"
        assert server.calls["ListSigningKeys"] >= 2  # read again before called missing
        server.rules["ListSigningKeys"] = omit_once("signingKeys", key)
        assert gov.run("apply", manifests, "--auto-approve", env=server.env).code == 0
    assert len(named(gov, "SigningKey", "release-pipeline")) == 1


# -- 7: a delete whose answer was lost is settled by a read -------------------------------


def test_a_delete_whose_request_never_arrived_is_not_taken_as_done(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = copy_examples(gov.folder)
    with FaultServer(gov) as server:
        assert gov.run("apply", str(manifests), "--auto-approve", env=server.env).code == 0
        path = manifests / "keys-and-labels.yaml"
        path.write_text("\n---\n".join(d for d in path.read_text().split("\n---\n")
                                        if "name: release-pipeline" not in d))
        write(manifests, "removed.yaml", """\
            apiVersion: govsync/v1
            kind: Removed
            metadata: {name: retire-release-key}
            spec: {from: SigningKey/release-pipeline, destroy: true}
            """)
        server.rules["DeleteSigningKey"] = drop_before()
        run = gov.run("apply", str(manifests), "--auto-approve", env=server.env)
        assert run.code == 1, run
        assert "still on the server: state keeps it" in run.err, run
        assert "SigningKey/release-pipeline" in gov.entries()
        assert len(named(gov, "SigningKey", "release-pipeline")) == 1
        # The next apply deletes it (the connection holds now).
        again = gov.run("apply", str(manifests), "--auto-approve", env=server.env)
        assert again.code == 0, again
    assert "SigningKey/release-pipeline" not in gov.entries()
    assert named(gov, "SigningKey", "release-pipeline") == []


# -- 8: every List bounded ------------------------------------------------------------------


def test_an_endless_list_is_one_line_of_error(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = str(copy_examples(gov.folder))
    with FaultServer(gov) as server:
        assert gov.run("apply", manifests, "--auto-approve", env=server.env).code == 0
        server.rules["ListHooks"] = endless("hooks", count=1)
        run = gov.run("plan", manifests, env=server.env)
        assert "ListHooks gave more pages than its count (1) allows" in run.out + run.err, run
        assert server.calls["ListHooks"] < 10
        assert "Traceback" not in run.out + run.err
        before = gov.entries()
        applied = gov.run("apply", manifests, "--auto-approve", env=server.env)
        assert applied.code == 1 and gov.entries() == before, applied


def test_an_enormous_answer_is_not_read_whole(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = str(copy_examples(gov.folder))
    with FaultServer(gov) as server:
        assert gov.run("apply", manifests, "--auto-approve", env=server.env).code == 0
        server.rules["ListHooks"] = huge("hooks", 70)
        run = gov.run("plan", manifests, env=server.env)
        assert "ListHooks: the answer is" in run.out + run.err, run
        assert "at most 64 MiB is read" in run.out + run.err, run
        assert "Traceback" not in run.out + run.err


# -- 10: the read of a read-modify-write is the one just before the write ----------------


class EditsWhenRead(io.BytesIO):
    """A terminal that answers the prompt, after the console has edited the object."""

    def __init__(self, answer: bytes, edit: Any) -> None:
        super().__init__(answer)
        self.edit = edit

    def read(self, size: int | None = -1) -> bytes:
        if self.edit is not None and size != 0:  # (click reads 0 bytes to learn the type)
            self.edit, edit = None, self.edit
            edit()
        return super().read(size)

    def read1(self, size: int | None = -1) -> bytes:
        if self.edit is not None and size != 0:
            self.edit, edit = None, self.edit
            edit()
        return super().read1(size)

    def readline(self, size: int | None = -1) -> bytes:
        if self.edit is not None and size != 0:
            self.edit, edit = None, self.edit
            edit()
        return super().readline(size)


HOOK = """\
    apiVersion: govsync/v1
    kind: Hook
    metadata: {{name: gate}}
    spec:
      code: "export default function hook() {{ return 1 }}"
      timeoutMs: {timeout}
    """


def prompted(gov: Gov, server: FaultServer, manifests: Path, edit: Any) -> Any:
    env = {"GOVSYNC_STATE": gov.state, "GOVSYNC_WORKSPACE": gov.workspace,
           **gov.env, **server.env}
    return CliRunner().invoke(cli, ["apply", str(manifests)], env=env,
                              input=EditsWhenRead(b"yes\n", edit))


def console_update(server: FaultServer, **fields: Any) -> None:
    """The console's edit through the same server, made while apply's event loop waits
    at its prompt."""
    path = BY_NAME["ListHooks"].path
    headers = {"X-API-KEY": KEY}
    (hook,) = [h for h in httpx.post(server.url + path, json={"limit": 10},
                                     headers=headers).json()["hooks"] if h["name"] == "gate"]
    answer = httpx.post(server.url + BY_NAME["UpdateHook"].path,
                        json={"hook": {**hook, **fields}}, headers=headers)
    assert answer.status_code == 200, answer.text


def test_a_console_edit_made_while_apply_waits_is_not_reverted(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = gov.folder / "m"
    write(manifests, "hooks.yaml", HOOK.format(timeout=1000))
    with FaultServer(gov) as server:
        assert gov.run("apply", str(manifests), "--auto-approve", env=server.env).code == 0
        write(manifests, "hooks.yaml", HOOK.format(timeout=2000))
        # A field the manifest does not set, edited while the prompt waits: neither put
        # back nor taken into govsync's record unseen.  The update is not sent; the next
        # plan shows the edit.
        result = prompted(gov, server, manifests, lambda: console_update(
            server, allowlistedNetworkHosts=["exfil.example.net"]))
        assert result.exit_code == 1, result.output
        assert ("allowlistedNetworkHosts changed on the server since the plan was made"
                in result.output)
        (hook,) = named_live(server, "gate")
        assert hook["timeoutMs"] == 1000
        assert hook["allowlistedNetworkHosts"] == ["exfil.example.net"]
        drift = gov.run("drift", str(manifests), env=server.env)
        assert drift.code == 2 and "allowlistedNetworkHosts" in drift.out, drift


def test_a_console_edit_of_a_field_the_update_writes_stops_that_update(
        sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = gov.folder / "m"
    write(manifests, "hooks.yaml", HOOK.format(timeout=1000))
    with FaultServer(gov) as server:
        assert gov.run("apply", str(manifests), "--auto-approve", env=server.env).code == 0
        write(manifests, "hooks.yaml", HOOK.format(timeout=2000))
        result = prompted(gov, server, manifests,
                          lambda: console_update(server, timeoutMs=3000))
        assert result.exit_code == 1, result.output
        assert "timeoutMs changed on the server since the plan was made" in result.output
        (hook,) = named_live(server, "gate")
        assert hook["timeoutMs"] == 3000  # not overwritten unseen: the next plan shows it


def named_live(server: FaultServer, name: str) -> list[dict[str, Any]]:
    return [h for h in server.store.list("Hook") if h["name"] == name]


# -- 11: a plan shows only fields it sends ------------------------------------------------


def test_a_heal_of_a_field_no_update_carries_is_blocked(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = gov.folder / "m"
    write(manifests, "hooks.yaml", HOOK.format(timeout=1000) + "  status: draft\n")
    write(gov.folder, "govsync.yaml", """\
        apiVersion: govsync/v1
        kind: Project
        paths: [m/]
        selfHeal: true
        """)
    gov.ok("apply", "--auto-approve")
    (hook,) = named(gov, "Hook", "gate")
    gov.store_update("Hook", hook["id"], status="active")
    run = gov.run("plan", "--format", "json")
    assert run.code == 1, run
    change = changes(run)["Hook/gate"]
    assert change["action"] == "blocked" and change["fields"] == ["status"], change
    assert "--replace Hook/gate" in change["reason"]


# -- 2: an id recorded in one workspace is not another's to adopt or delete -----------


def test_another_workspaces_object_is_neither_adopted_nor_deleted(gov: Gov) -> None:
    import dataclasses

    from govsync.state import APPLIED, Entry, open_store

    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    prod = gov.entries()
    connector = prod["Connector/ml-gateway-us"]["id"]
    space = prod["Space/ml-platform"]["id"]
    other = dataclasses.replace(gov, workspace=gov.workspace + "-other")
    folder = gov.folder / "other"
    write(folder, "take.yaml", f"""\
        apiVersion: govsync/v1
        kind: Connector
        metadata: {{name: ml-gateway-us}}
        spec: {{spaceId: {space}}}
        ---
        apiVersion: govsync/v1
        kind: Import
        metadata: {{name: take}}
        spec: {{to: Connector/ml-gateway-us, id: {connector}}}
        """)
    run = other.run("plan", str(folder), "--format", "json")
    assert run.code == 1, run
    change = changes(run)["Connector/ml-gateway-us"]
    assert change["action"] == "blocked" and change["why"]["why"] == "owned-elsewhere", change
    assert change["why"]["names"] == [gov.workspace, "Connector/ml-gateway-us"]
    refused = other.run("state", "import", "Connector/ml-gateway-us", connector, str(folder))
    assert refused.code == 1 and f"recorded by workspace {gov.workspace!r}" in refused.err
    # A record made before this rule (or behind govsync's back): its delete is still
    # not this workspace's to make.
    with open_store(gov.state) as store:
        store.put(other.workspace, Entry("Connector/ml-gateway-us", "Connector", connector,
                                         APPLIED, {"name": "ml-gateway-us",
                                                   "spaceId": space}))
    write(folder, "take.yaml", """\
        apiVersion: govsync/v1
        kind: Removed
        metadata: {name: drop}
        spec: {from: Connector/ml-gateway-us, destroy: true}
        """)
    run = other.run("apply", str(folder), "--auto-approve")
    assert run.code == 1 and "belong(s) to another workspace" in run.err, run
    assert [c["id"] for c in named(gov, "Connector", "ml-gateway-us")] == [connector]
    assert "No changes" in gov.ok("plan", manifests).out
