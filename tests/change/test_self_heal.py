"""Self-heal (contract section 12): an environment with ``selfHeal: true`` plans and
applies the updates that put back what changed outside govsync, under the same rules and
approvals as any change; without it, drift is reported, never reverted."""

from __future__ import annotations

from pathlib import Path

from refreshkit import Gov, console_adds_a_host, copy_examples, hosts, write


def project(gov: Gov, manifests: Path, heal: bool) -> None:
    write(gov.folder, "govsync.yaml", f"""\
        apiVersion: govsync/v1
        kind: Project
        paths: [{manifests}]
        environments:
          prod:
            workspace: {gov.workspace}
            selfHeal: {str(heal).lower()}
        """)


def test_without_self_heal_drift_is_reported_never_reverted(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    project(gov, manifests, heal=False)
    gov.ok("apply", "--env", "prod", "--auto-approve")
    console_adds_a_host(gov)
    plan = gov.ok("plan", "--env", "prod", "--format", "json").json()
    assert all(c["action"] == "no-op" for c in plan["changes"])
    gov.ok("apply", "--env", "prod", "--auto-approve")
    assert "exfil.example.net" in hosts(gov)


def test_self_heal_puts_back_what_changed_outside(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    project(gov, manifests, heal=True)
    gov.ok("apply", "--env", "prod", "--auto-approve")
    console_adds_a_host(gov)
    plan = gov.ok("plan", "--env", "prod", "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert (change["address"], change["action"]) == ("Hook/risk_score", "update")
    assert change["reason"] == "selfHeal: puts back what changed outside govsync"
    assert "exfil.example.net" in str(change["diff"])
    gov.ok("apply", "--env", "prod", "--auto-approve")
    assert "exfil.example.net" not in hosts(gov)
    assert "No changes" in gov.ok("plan", "--env", "prod").out


def test_self_heal_is_held_to_the_rules(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    project(gov, manifests, heal=True)
    gov.ok("apply", "--env", "prod", "--auto-approve")
    text = (gov.folder / "govsync.yaml").read_text()
    (gov.folder / "govsync.yaml").write_text(text + """\
rules:
  - name: hooks-frozen
    match: {kinds: [Hook], environments: [prod]}
    expression: "change.action != 'update'"
    message: "hooks change only in a release"
""")
    console_adds_a_host(gov)
    run = gov.run("apply", "--env", "prod", "--auto-approve")
    assert run.code == 1 and "hooks change only in a release" in run.err, run
    assert "exfil.example.net" in hosts(gov)
