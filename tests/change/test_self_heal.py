"""Outside changes (contract section 12, amended): any apply puts back what the manifests
set, as Terraform's plan and Argo CD's sync do, under the same rules and approvals as any
change; ``selfHeal`` decides only whether the agent does it by itself (its tests are
test_agent_self_heal.py)."""

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


def test_any_apply_puts_back_what_changed_outside(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    project(gov, manifests, heal=False)  # selfHeal is the agent's, not apply's
    gov.ok("apply", "--env", "prod", "--auto-approve")
    console_adds_a_host(gov)
    # Only outside changes: the plan shows the update that puts them back, exit 2.
    exit_code = gov.run("plan", "--env", "prod", "--detailed-exitcode").code
    assert exit_code == 2
    plan = gov.ok("plan", "--env", "prod", "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert (change["address"], change["action"]) == ("Hook/risk_score", "update")
    assert change["why"] == {"why": "outside"}
    assert change["reason"].startswith("puts back what changed outside govsync")
    assert change["outside"] and "exfil.example.net" in str(change["diff"])
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
