"""Guardrails and approvals end to end: a project with staging and prod on
``--endpoint local``, CEL rules, plans signed with SSH keys (govsync's and
ssh-keygen's signatures, both ways), and the audit export of both backends."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli
from testkit import drop_pg_workspaces, without_settings

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                      reason="ssh-keygen is not installed")

ROOT = Path(__file__).resolve().parents[2]

HOOK = """\
apiVersion: govsync/v1
kind: Hook
metadata:
  name: risk
spec:
  code: "export default function hook() { return 1; }"
  timeoutMs: {var: timeout}
  status: active
"""

PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
endpoint: local
vars: {timeout: 9000}
environments:
  staging: {STATE}
  prod: {STATE}
rules:
  - name: prod-short-hooks
    match: {kinds: [Hook], environments: [prod]}
    expression: "object.spec.timeoutMs <= 5000"
    message: "hooks in prod must time out within 5 s"
  - name: staging-short-hooks
    match: {kinds: [Hook], environments: [staging]}
    expression: "object.spec.timeoutMs <= 5000"
    message: "hooks should time out within 5 s"
    severity: warning
  - name: hooks-named
    match: {kinds: [Hook]}
    expression: "object.name == object.spec.name && change.action in ['create', 'update', 'no-op']"
approvals:
  required: 2
  allowedSigners: .govsync/allowed_signers
  environments: [prod]
"""


class Project:
    def __init__(self, root: Path, state: str | None = None) -> None:
        self.root = root
        (root / "manifests").mkdir(parents=True)
        (root / "manifests" / "hooks.yaml").write_text(HOOK)
        suffix = uuid.uuid4().hex[:8]
        self.workspaces = [f"staging-{suffix}", f"prod-{suffix}"] if state else []
        settings = (f"{{state: '{state}', workspace: %s-{suffix}}}" if state else "{}")
        text = PROJECT.replace("staging: {STATE}", "staging: " + (settings % "staging"
                                                               if state else "{}"))
        text = text.replace("prod: {STATE}", "prod: " + (settings % "prod" if state else "{}"))
        (root / "govsync.yaml").write_text(text)
        (root / ".govsync").mkdir()
        (root / ".govsync" / "allowed_signers").write_text("")
        self.keys = root / "keys"
        self.keys.mkdir()

    def run(self, *args: str, env: dict[str, str] | None = None,
            input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), env=env, input=input)

    def key(self, name: str, allowed: str | None = "") -> Path:
        path = self.keys / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
                        str(path)], check=True)
        if allowed is not None:
            kind, b64 = (path.with_suffix(".pub")).read_text().split()[:2]
            with open(self.root / ".govsync" / "allowed_signers", "a") as fh:
                fh.write(f"{name}@example.com {allowed}{' ' if allowed else ''}{kind} {b64}\n")
        return path

    def set_timeout(self, value: int) -> None:
        text = (self.root / "govsync.yaml").read_text()
        lines = [f"vars: {{timeout: {value}}}" if ln.startswith("vars:") else ln
                 for ln in text.splitlines()]
        (self.root / "govsync.yaml").write_text("\n".join(lines) + "\n")

    def objects(self) -> list[str]:
        from govsync.server.store import Store

        db = self.root / ".govsync" / "local-api.db"
        if not db.exists():
            return []
        store = Store(str(db))
        try:
            return sorted(h["name"] for h in store.list("Hook"))
        finally:
            store.close()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(tmp_path)
    without_settings(monkeypatch)
    return Project(tmp_path)


# -- rules ----------------------------------------------------------------------------


def test_a_rule_blocks_prod_and_warns_in_staging(project: Project) -> None:
    prod = project.run("plan", "--env", "prod")
    assert prod.exit_code == 1, prod.output
    assert ("manifests/hooks.yaml:1:1: rule prod-short-hooks: hooks in prod must time out "
            "within 5 s (Hook/risk)") in prod.stderr
    applied = project.run("apply", "--env", "prod", "--auto-approve")
    assert applied.exit_code == 1 and project.objects() == []

    staging = project.run("plan", "--env", "staging", "--format", "json")
    assert staging.exit_code == 0, staging.output
    checks = json.loads(staging.stdout)["checks"]
    assert {"name": "rule staging-short-hooks", "status": "warning",
            "detail": "Hook/risk at manifests/hooks.yaml:1:1: hooks should time out within 5 s"
            } in checks
    assert {"name": "rule hooks-named", "status": "passed", "detail": "1 object checked"
            } in checks
    assert not any(c["name"] == "rule prod-short-hooks" for c in checks)
    markdown = project.run("plan", "--env", "staging", "--format", "markdown").stdout
    assert "check **rule staging-short-hooks**: warning" in markdown

    # validate: every environment, `change` rules left to plan.
    valid = project.run("validate")
    assert valid.exit_code == 1
    assert "(environment prod) rule prod-short-hooks" in valid.stderr
    assert "warning: rule staging-short-hooks" in valid.stderr
    assert "hooks-named" not in valid.stderr

    staged = project.run("apply", "--env", "staging", "--auto-approve")
    assert staged.exit_code == 0, staged.output
    assert project.objects() == ["risk"]
    # Planned again, the hook is unchanged: a rule's `change` is then the plan's no-op.
    again = project.run("plan", "--env", "staging", "--format", "json")
    assert again.exit_code == 0, again.output
    assert {"name": "rule hooks-named", "status": "passed", "detail": "1 object checked"
            } in json.loads(again.stdout)["checks"]


@pytest.mark.parametrize(("expression", "wanted"), [
    ("object.spec.timeoutMs <=", "govsync.yaml:23:17: rule bad: the expression does not "
                                 "compile: Syntax error"),
    ("objekt.kind == 'Hook'", "govsync.yaml:23:17: rule bad: unknown variable 'objekt'"),
    ("object.name + 'x'", "govsync.yaml:23:17: rule bad: the expression gives a string, "
                          "not a bool"),
    ("object.spec.timeoutMs", "manifests/hooks.yaml:1:1: rule bad (govsync.yaml:23): the "
                              "expression gave an int on Hook/risk, not a bool"),
    ("object.spec.missing == 1", "manifests/hooks.yaml:1:1: rule bad (govsync.yaml:23): "
                                 "evaluation failed on Hook/risk: NOT_FOUND"),
])
def test_a_broken_rule_is_one_line_at_its_place(project: Project, expression: str,
                                                wanted: str) -> None:
    project.set_timeout(1000)
    text = (project.root / "govsync.yaml").read_text()
    bad = f'  - name: bad\n    expression: "{expression}"\napprovals:'
    (project.root / "govsync.yaml").write_text(text.replace("approvals:", bad, 1))
    for args in (["validate", "--env", "staging"], ["plan", "--env", "staging"]):
        result = project.run(*args)
        assert result.exit_code == 1, result.output
        lines = [ln for ln in result.stderr.splitlines() if ln]
        assert lines[0].startswith(wanted), lines
        assert len(lines) == 2 and "nothing was sent" in lines[1]
        assert "Traceback" not in result.output
    assert project.objects() == []


def test_a_malformed_rules_section_points_at_the_project_file(project: Project) -> None:
    text = (project.root / "govsync.yaml").read_text()
    text = text.replace("environments: [staging]}", "environments: [stagin]}")
    text = text.replace("severity: warning", "severity: fatal")
    (project.root / "govsync.yaml").write_text(text)
    result = project.run("validate")
    assert result.exit_code == 1
    assert "govsync.yaml:15:43: unknown environment 'stagin' in rule" in result.stderr
    assert "severity must be error or warning" in result.stderr


# -- approvals ------------------------------------------------------------------------


def _signature_blocks(text: str) -> list[str]:
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("-----BEGIN"):
            current = [line]
        elif current is not None:
            current.append(line)
            if line.startswith("-----END"):
                blocks.append("\n".join(current) + "\n")
                current = None
    return blocks


@needs_ssh_keygen
def test_approve_without_a_terminal_asks_on_standard_input(project: Project,
                                                          tmp_path: Path) -> None:
    """Issue 34: approve without a terminal signed without asking, while apply asks."""
    project.set_timeout(1000)
    alice = project.key("alice")
    plan, sig = tmp_path / "plan.json", tmp_path / "plan.json.sig"
    assert project.run("plan", "--env", "prod", "--out", str(plan)).exit_code == 0
    for answer, said in (("", "standard input ended before an answer"),
                         ("no\n", "the answer was 'no', and only 'yes' signs")):
        refused = project.run("approve", str(plan), "--key", str(alice), input=answer)
        assert refused.exit_code == 1, refused.output
        assert f"Error: not signed: {said}" in refused.stderr, refused.stderr
        assert not sig.exists()
    signed = project.run("approve", str(plan), "--key", str(alice), input="yes\n")
    assert signed.exit_code == 0, signed.output
    assert "Sign this plan?" in signed.stderr and sig.exists()


@needs_ssh_keygen
def test_a_prod_plan_needs_two_distinct_signers(project: Project, tmp_path: Path) -> None:
    project.set_timeout(1000)
    alice, bob = project.key("alice"), project.key("bob")
    carol = project.key("carol", allowed=None)  # not an allowed signer
    plan = tmp_path / "plan.json"
    sig = tmp_path / "plan.json.sig"
    assert project.run("plan", "--env", "prod", "--out", str(plan)).exit_code == 0

    # Not a saved plan: refused in prod.
    direct = project.run("apply", "--env", "prod", "--auto-approve")
    assert direct.exit_code == 1 and "requires 2 signed approval(s)" in direct.stderr

    none = project.run("apply", "--env", "prod", str(plan))
    assert none.exit_code == 1 and "has 0 valid; there is no" in none.stderr

    assert project.run("approve", "--yes", str(plan), "--key", str(alice)).exit_code == 0
    one = project.run("apply", "--env", "prod", str(plan))
    assert one.exit_code == 1
    assert "has 1 valid: alice@example.com" in one.stderr and "1 more signer" in one.stderr

    # The same signer twice (govsync keeps one per key; a pasted copy does not count).
    copied = _signature_blocks(sig.read_text())[0]
    with open(sig, "a") as fh:
        fh.write(copied)
    twice = project.run("apply", "--env", "prod", str(plan))
    assert twice.exit_code == 1
    assert "has 1 valid: alice@example.com" in twice.stderr
    assert "a repeated signature by alice@example.com" in twice.stderr

    # An unknown key cannot approve, and its signature made elsewhere does not count.
    refused = project.run("approve", "--yes", str(plan), "--key", str(carol))
    assert refused.exit_code == 1 and "is not in .govsync/allowed_signers" in refused.stderr
    digest = project.run("show", str(plan), "--digest").stdout.encode()
    assert digest.startswith(b"govsync-plan-review sha256:")
    made = subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "govsync-plan", "-f", str(carol)],
                          input=digest, capture_output=True, check=True)
    with open(sig, "ab") as fh:
        fh.write(made.stdout)
    unknown = project.run("apply", "--env", "prod", str(plan))
    assert unknown.exit_code == 1 and "is not in the allowed signers" in unknown.stderr

    # Bob's signature over another plan does not count.
    other = tmp_path / "other.json"
    project.set_timeout(2000)
    assert project.run("plan", "--env", "prod", "--out", str(other)).exit_code == 0
    project.set_timeout(1000)
    assert project.run("approve", "--yes", str(other), "--key", str(bob)).exit_code == 0
    with open(sig, "a") as fh:
        fh.write(_signature_blocks((tmp_path / "other.json.sig").read_text())[0])
    wrong = project.run("apply", "--env", "prod", str(plan))
    assert wrong.exit_code == 1
    assert "bob@example.com's signature is over another plan" in wrong.stderr
    assert project.objects() == []

    # Bob signs the digest with ssh-keygen: it counts, and the plan is applied.
    made = subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "govsync-plan", "-f", str(bob)],
                          input=digest, capture_output=True, check=True)
    with open(sig, "ab") as fh:
        fh.write(made.stdout)
    shown = project.run("show", str(plan))
    assert shown.exit_code == 0, shown.output
    assert "Approvals: 2 valid of 2 required" in shown.stdout, shown.stdout
    assert shown.stdout.count("approved by ") == 2 and "not counted: " in shown.stdout
    applied = project.run("apply", "--env", "prod", str(plan))
    assert applied.exit_code == 0, applied.output
    assert project.objects() == ["risk"]

    # govsync's signature verifies with ssh-keygen -Y verify.
    alone = tmp_path / "alice.sig"
    alone.write_text(_signature_blocks(sig.read_text())[0])
    checked = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(project.root / ".govsync" / "allowed_signers"),
         "-I", "alice@example.com", "-n", "govsync-plan", "-s", str(alone)],
        input=digest, capture_output=True, check=False)
    assert checked.returncode == 0, checked.stderr
    assert b'Good "govsync-plan" signature for alice@example.com' in checked.stdout

    # The audit entry names the approvers and the plan's hash.
    exported = project.run("audit", "export", "--env", "prod")
    record = json.loads(exported.stdout.splitlines()[-1])
    assert [a["principal"] for a in record["approvers"]] == ["alice@example.com",
                                                             "bob@example.com"]
    assert record["planHash"] == "sha256:" + hashlib.sha256(plan.read_bytes()).hexdigest()
    assert record["reviewDigest"] == "sha256:" + digest.decode().split("sha256:")[1].strip()


@needs_ssh_keygen
def test_an_edited_plan_invalidates_every_signature(project: Project, tmp_path: Path) -> None:
    project.set_timeout(1000)
    alice, bob = project.key("alice"), project.key("bob")
    plan = tmp_path / "plan.json"
    assert project.run("plan", "--env", "prod", "--out", str(plan)).exit_code == 0
    for key in (alice, bob):
        assert project.run("approve", "--yes", str(plan), "--key", str(key)).exit_code == 0
    plan.write_text(plan.read_text().replace('"timeoutMs":1000', '"timeoutMs":999'))
    edited = project.run("apply", "--env", "prod", str(plan))
    assert edited.exit_code == 1
    assert "was changed after it was made" in edited.stderr
    shown = project.run("show", "--env", "prod", str(plan))
    assert "Authentication: DOES NOT VERIFY" in shown.stdout
    assert "Approvals: 0 valid of 2 required" in shown.stdout
    assert "alice@example.com's signature is over another plan" in shown.stdout
    assert "bob@example.com's signature is over another plan" in shown.stdout
    assert "timeoutMs: 999" in shown.stdout  # what would be sent, as it is in the file
    assert project.objects() == []


@needs_ssh_keygen
def test_bad_signers_and_signature_files_are_one_line(project: Project, tmp_path: Path) -> None:
    project.set_timeout(1000)
    alice = project.key("alice")
    bob = project.key("bob", allowed='valid-before="20200101"')
    plan = tmp_path / "plan.json"
    sig = tmp_path / "plan.json.sig"
    assert project.run("plan", "--env", "prod", "--out", str(plan)).exit_code == 0
    for key in (alice, bob):
        assert project.run("approve", "--yes", str(plan), "--key", str(key)).exit_code == 0

    def refused(*needles: str) -> None:
        result = project.run("apply", "--env", "prod", str(plan))
        assert result.exit_code == 1, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), lines
        for needle in needles:
            assert needle in lines[0], lines[0]
        assert project.objects() == []

    refused("has 1 valid: alice@example.com", "bob@example.com's key expired (2020-01-01")

    good = sig.read_text()
    sig.write_text(good[: good.rindex("-----END")])
    refused(f"{sig}:", "(the file is truncated)")
    sig.write_text(good)

    signers = project.root / ".govsync" / "allowed_signers"
    kept = signers.read_text()
    signers.write_text(kept + "mallory@example.com ssh-ed25519 not-base64!\n")
    refused(".govsync/allowed_signers:3: the ssh-ed25519 key is malformed")
    signers.write_text(kept + "ca@example.com cert-authority " + kept.split(" ", 1)[1])
    refused(".govsync/allowed_signers:3: cert-authority (SSH certificates) is not supported")
    signers.unlink()
    refused("govsync.yaml:", "the allowed-signers file .govsync/allowed_signers does not exist")


@needs_ssh_keygen
@pytest.mark.parametrize("kind", ["ecdsa", "rsa"])
def test_other_key_types_interoperate(tmp_path: Path, kind: str) -> None:
    from govsync import sshsig

    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True)
    message = b"a plan"
    ours = sshsig.sign(sshsig.load_private_key(key.read_bytes()), message, "govsync-plan")
    allowed = tmp_path / "allowed"
    allowed.write_text("me " + (tmp_path / "key.pub").read_text())
    (tmp_path / "ours.sig").write_text(ours)
    checked = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "me",
                              "-n", "govsync-plan", "-s", str(tmp_path / "ours.sig")],
                             input=message, capture_output=True, check=False)
    assert checked.returncode == 0, checked.stderr
    theirs = subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "govsync-plan", "-f", str(key)],
                            input=message, capture_output=True, check=True).stdout.decode()
    parsed = sshsig.parse(sshsig.dearmor(theirs))
    assert sshsig.verify(parsed, message)
    assert not sshsig.verify(parsed, message + b"!")


# -- audit ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_audit_export_matches_what_was_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               backend: str, request: pytest.FixtureRequest
                                               ) -> None:
    state = None
    if backend == "postgres":
        state = os.environ.get("GOVSYNC_TEST_POSTGRES")
        if not state:
            pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GOVSYNC_ACTOR", "ci-bot")
    project = Project(tmp_path, state)
    if state:  # the shared database keeps nothing of this test
        request.addfinalizer(lambda: drop_pg_workspaces(state, project.workspaces))
    project.set_timeout(1000)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "manifests"], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert project.run("apply", "--env", "staging", "--auto-approve").exit_code == 0
    (tmp_path / "manifests" / "more.yaml").write_text(HOOK.replace("name: risk",
                                                                   "name: fraud"))
    assert project.run("apply", "--env", "staging", "--auto-approve").exit_code == 0

    lines = project.run("audit", "export", "--env", "staging").stdout.splitlines()
    records = [json.loads(ln) for ln in lines]
    assert [[c["address"] for c in r["changes"]] for r in records] == [["Hook/risk"],
                                                                      ["Hook/fraud"]]
    assert all(r["changes"][0]["status"] == "applied" for r in records)
    assert [r["git"] for r in records] == [{"commit": head, "dirty": False},
                                           {"commit": head, "dirty": True}]
    assert {r["environment"] for r in records} == {"staging"}
    assert {r["actor"] for r in records} == {"ci-bot"}
    assert all(r["formatVersion"] == "1.0" and r["planHash"].startswith("sha256:")
               for r in records)
    if state:
        assert state.split("@")[0] not in json.dumps(records) or ":" not in state.split("//")[1]

    rows = list(csv.DictReader(io.StringIO(
        project.run("audit", "export", "--env", "staging", "--format", "csv").stdout)))
    assert [(r["address"], r["outcome"], r["gitDirty"]) for r in rows] == [
        ("Hook/risk", "applied", "False"), ("Hook/fraud", "applied", "True")]

    later = project.run("audit", "export", "--env", "staging", "--since", records[1]["at"])
    assert len(later.stdout.splitlines()) == 1
    assert project.run("audit", "export", "--env", "staging",
                       "--since", "2999-01-01").stdout == ""
    bad = project.run("audit", "export", "--env", "staging", "--since", "yesterday")
    assert bad.exit_code == 1 and "--since 'yesterday'" in bad.stderr

    # A saved plan records the commit it was made from: that is what the audit names,
    # even when the checkout has moved on by the time the plan is applied.
    (tmp_path / "manifests" / "third.yaml").write_text(HOOK.replace("name: risk",
                                                                    "name: third"))
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "third"], check=True)
    assert project.run("plan", "--env", "staging", "--out", "p.json").exit_code == 0
    planned_at = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "later"], check=True)
    assert project.run("apply", "p.json", "--env", "staging").exit_code == 0
    last = json.loads(project.run("audit", "export", "--env", "staging").stdout.splitlines()[-1])
    assert last["git"] == {"commit": planned_at, "dirty": False}


def test_the_example_rules_of_init_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from govsync.init import scaffold

    text = scaffold(ci="none")["govsync.yaml"]
    body = "\n".join(ln.replace("# ", "", 1) if ln.startswith(("# ", "#   ")) and (
        ln.startswith(("# environments", "#   ", "# rules", "# approvals", "# impact"))) else ln
        for ln in text.splitlines())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "govsync.yaml").write_text(body)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "hooks.yaml").write_text(HOOK.replace(
        "status: active", "status: active\n  allowlistedNetworkHosts: [api.other.org]").replace(
        "{var: timeout}", "1000"))
    result = CliRunner().invoke(cli, ["validate"])
    assert result.exit_code == 0, result.output
    assert "warning: rule hooks-stay-home: hooks may reach only *.example.com" in result.stderr


def test_an_unsaved_apply_records_the_hash_of_the_plan_it_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's planHash of an apply without a saved plan is the plan's canonical
    digest (computed on a worker thread while the requests are in flight), the
    live checks included: the policy's owner group is checked first."""
    monkeypatch.chdir(tmp_path)  # the embedded server's database is under .govsync/
    from govsync import planfile
    from govsync.commands.applying import apply
    from govsync.commands.sources import Manifests
    from govsync.manifests import load
    from govsync.settings import Settings
    from govsync.state import open_store

    (tmp_path / "m.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: audited}\n---\n"
        "apiVersion: govsync/v1\nkind: Connector\nmetadata: {name: c-audited}\n"
        "spec: {spaceRef: audited}\n---\n"
        "apiVersion: govsync/v1\nkind: Policy\nmetadata: {name: p-audited}\n"
        "spec: {code: \"package p\\nallow := true\", groupName: data-platform}\n")
    settings = Settings(endpoint="local", state=str(tmp_path / "state.db"),
                        local_seed=str(ROOT / "examples" / "server-seed.yaml"), environ={})
    plan, result = apply(Manifests(load([str(tmp_path / "m.yaml")])), settings)
    assert not result.stopped and len(result.outcomes) == 3
    assert [c.name for c in plan.checks] == ["refresh", "policy code", "groups"]
    with open_store(settings.state) as store:
        (record,) = store.history("default")
    assert record["planHash"] == "sha256:" + planfile.plan_digest(plan)
