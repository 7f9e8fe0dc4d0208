"""Governance bound to the workspace (issue 21, findings 1, 2, 5, 6 and 7).

Each test first governs prod as an organisation would (its first apply with
two approvals), then tries to get around that as an attacker with the
applying credentials would, and checks that the server never holds what the
attacker wanted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from govkit import HOOK, Repo


def governed(repo: Repo) -> tuple[Path, Path]:
    """prod applied once, with its two approvals: the workspace records its governance."""
    alice, bob = repo.key("alice"), repo.key("bob")
    first = repo.approved_apply(alice, bob)
    assert first.code == 0, first
    assert repo.hooks()["risk"]["timeoutMs"] == 1500
    return alice, bob


def test_naming_another_environment_does_not_skip_approvals(repo: Repo) -> None:
    governed(repo)
    repo.set_timeout(4000)
    # Finding 1: the environment variables of another environment, or the options.
    tries = [
        repo.gov("apply", "--auto-approve", "manifests", "envs/prod",
                 env=repo.environ(GOVSYNC_ENV="staging", GOVSYNC_WORKSPACE=repo.prod)),
        repo.gov("apply", "--env", "staging", "--workspace", repo.prod, "--auto-approve",
                 "manifests", "envs/prod"),
        repo.gov("apply", "--workspace", repo.prod, "--auto-approve", "manifests",
                 "envs/prod"),
    ]
    saved = repo.root / "staging-plan.json"
    # A saved plan is refused the same way when it is made...
    made = repo.gov("plan", "--env", "staging", "--workspace", repo.prod, "--out", str(saved),
                    "manifests", "envs/prod")
    tries.append(made)
    assert not saved.exists()
    # ... and a plan staging may make is refused on prod's workspace.
    (repo.root / "other").mkdir()
    (repo.root / "other" / "hooks.yaml").write_text(HOOK.format(name="sneaky"))
    made = repo.gov("plan", "--env", "staging", "--out", str(saved), "other")
    assert made.code == 0, made
    tries.append(repo.gov("apply", "--env", "staging", "--workspace", repo.prod, str(saved)))
    assert "is a plan for workspace" in tries[-1].err, tries[-1]
    for attempt in tries:
        assert attempt.code == 1, attempt
        assert "prod" in attempt.err and "nothing was sent" in attempt.err, attempt
        assert "Traceback" not in attempt.err
    assert repo.hooks()["risk"]["timeoutMs"] == 1500
    assert "sneaky" not in repo.hooks()


def test_a_project_file_of_ones_choosing_does_not_skip_approvals(repo: Repo) -> None:
    governed(repo)
    repo.set_timeout(4000)
    empty = repo.root.parent / "empty.yaml"
    empty.write_text("apiVersion: govsync/v1\nkind: Project\nvars: {timeout: 4000}\n")
    no_project = repo.gov("apply", "--project", str(empty), "--workspace", repo.prod,
                          "--state", repo.state, "--auto-approve", "manifests", "envs/prod")
    assert no_project.code == 1 and "belongs to environment prod" in no_project.err, no_project
    # Outside the repository: no project file at all.
    outside = repo.root.parent / "elsewhere"
    outside.mkdir()
    bare = repo.gov("apply", "--workspace", repo.prod, "--state", repo.state, "--var",
                    "timeout=4000", "--auto-approve", str(repo.root / "manifests"),
                    cwd=outside)
    assert bare.code == 1 and "belongs to environment prod" in bare.err, bare
    # A project of one's own that names prod and asks for no approvals: loosening
    # them is a change that needs the approvals the workspace recorded.
    weak = repo.root / "weak.yaml"
    text = (repo.root / "govsync.yaml").read_text()
    weak.write_text(text[:text.index("approvals:")])
    loosened = repo.gov("apply", "--project", str(weak), "--env", "prod", "--auto-approve")
    assert loosened.code == 1, loosened
    assert "requires 2 signed approval(s)" in loosened.err, loosened
    shown = repo.gov("plan", "--project", str(weak), "--env", "prod")
    assert "approvals required 2 -> 0" in shown.out, shown
    assert repo.hooks()["risk"]["timeoutMs"] == 1500


def test_loosening_approvals_needs_the_recorded_signers(repo: Repo) -> None:
    alice, bob = governed(repo)
    mallory = repo.root / "keys" / "mallory"
    # The pull request adds mallory's key and lowers the count to one.
    mallory = repo.key("mallory")
    project = repo.root / "govsync.yaml"
    project.write_text(project.read_text().replace("required: 2", "required: 1"))
    plan = repo.root / "loosen.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(plan)).code == 0
    assert repo.gov("approve", "--yes", str(plan), "--key", str(mallory)).code == 0
    refused = repo.gov("apply", "--env", "prod", str(plan))
    assert refused.code == 1, refused
    assert "needs 2 approvals" in refused.err and "recorded with workspace" in refused.err
    assert "is not in the allowed signers" in refused.err  # mallory's: not recorded
    # With the recorded signers' approvals, the change applies, and from then on one
    # approval by any of the three is enough.
    for key in (alice, bob):
        assert repo.gov("approve", "--yes", str(plan), "--key", str(key)).code == 0
    applied = repo.gov("apply", "--env", "prod", str(plan))
    assert applied.code == 0, applied
    repo.set_timeout(2000)
    after = repo.approved_apply(mallory)
    assert after.code == 0, after
    assert repo.hooks()["risk"]["timeoutMs"] == 2000


def test_rules_hold_at_apply_whatever_the_caller_names(repo: Repo) -> None:
    """Finding 2: a prod rule is evaluated at apply, on what is sent, for the
    workspace's environment, even where the caller's project file lacks it."""
    alice, bob = governed(repo)
    repo.set_timeout(9000)
    assert repo.gov("plan", "--env", "prod").code == 1
    without_env = repo.gov("apply", "--workspace", repo.prod, "--auto-approve", "manifests",
                           "envs/prod")
    assert without_env.code == 1, without_env
    # A project file without the rule; approvals would be collected for it.
    text = (repo.root / "govsync.yaml").read_text()
    norule = repo.root / "norule.yaml"
    norule.write_text(text[:text.index("rules:")] + text[text.index("approvals:"):])
    plan = repo.root / "norule.json"
    made = repo.gov("plan", "--project", str(norule), "--env", "prod", "--out", str(plan))
    assert made.code == 1, made  # the rule recorded with prod still holds at plan
    assert "prod-short-hooks" in made.err
    assert repo.hooks()["risk"]["timeoutMs"] == 1500


def test_a_saved_plan_is_checked_against_the_rules_again(repo: Repo) -> None:
    """A saved plan, made while a looser rule was recorded, is refused when applied
    after a tighter rule was recorded (the state's entries did not change meanwhile,
    so only the rules checked again at apply stand in the way)."""
    alice, bob = governed(repo)
    project = repo.root / "govsync.yaml"
    tight = project.read_text()
    project.write_text(tight.replace("timeoutMs <= 5000", "timeoutMs <= 9000"))
    assert repo.approved_apply(alice, bob).code == 0  # records the looser rule
    repo.set_timeout(7000)
    loose = repo.root / "loose.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(loose)).code == 0
    for key in (alice, bob):
        assert repo.gov("approve", "--yes", str(loose), "--key", str(key)).code == 0
    project.write_text(tight)  # the rule tightened again, and recorded
    assert repo.approved_apply(alice, bob).code == 0
    refused = repo.gov("apply", "--env", "prod", str(loose))
    assert refused.code == 1, refused
    assert "prod-short-hooks" in refused.err and "nothing was sent" in refused.err
    assert repo.hooks()["risk"]["timeoutMs"] == 1500


def test_a_saved_plan_applies_at_most_once(repo: Repo) -> None:
    """Finding 7: apply P, forget what it made (the state is as it was when P was
    made), apply P again: refused, nothing created twice."""
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    plan = repo.root / "p.json"
    (repo.root / "manifests" / "more.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: once}\nspec: {}\n")
    assert repo.gov("plan", "--env", "staging", "--out", str(plan)).code == 0
    first = repo.gov("apply", "--env", "staging", str(plan))
    assert first.code == 0, first
    count = repo.count()
    assert repo.gov("state", "forget", "Space/once", "--env", "staging").code == 0
    again = repo.gov("apply", "--env", "staging", str(plan))
    assert again.code == 1, again
    assert "applied already" in again.err and "at most once" in again.err
    assert repo.count() == count


def test_one_object_has_one_address(repo: Repo) -> None:
    """Finding 6: an id recorded at one address cannot be imported at another."""
    first = repo.gov("apply", "--env", "staging", "--auto-approve")
    assert first.code == 0, first
    listed = repo.gov("state", "list", "--env", "staging", "--format", "json")
    risk_id = next(e["id"] for e in __import__("json").loads(listed.out)["entries"]
                   if e["address"] == "Hook/risk")
    (repo.root / "manifests" / "twin.yaml").write_text(
        (repo.root / "manifests" / "hooks.yaml").read_text().replace("name: risk",
                                                                    "name: twin"))
    (repo.root / "manifests" / "import.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Import\nmetadata: {name: twin}\n"
        f"spec: {{to: Hook/twin, id: {risk_id}}}\n")
    planned = repo.gov("plan", "--env", "staging")
    assert planned.code == 1 and "already recorded at Hook/risk" in planned.err, planned
    applied = repo.gov("apply", "--env", "staging", "--auto-approve")
    assert applied.code == 1
    (repo.root / "manifests" / "import.yaml").unlink()
    imported = repo.gov("state", "import", "Hook/twin", risk_id, "--env", "staging")
    assert imported.code == 1 and "already recorded at Hook/risk" in imported.err, imported
    assert list(repo.hooks()) == ["risk"]


def test_restoring_the_backup_never_creates_twice(sqlite_repo: Repo) -> None:
    """Finding 5: a truncated state, the advice followed: nothing is created again."""
    repo = sqlite_repo
    (repo.root / "manifests" / "spaces.yaml").write_text("".join(
        f"---\napiVersion: govsync/v1\nkind: Space\nmetadata: {{name: s{i}}}\nspec: {{}}\n"
        for i in range(5)))
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    (repo.root / "manifests" / "more.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: later}\nspec: {}\n")
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    count = repo.count()
    state = Path(repo.state)
    with sqlite3.connect(state) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2])
    broken = repo.gov("plan", "--env", "staging")
    assert broken.code == 1 and "Restore it from" in broken.err, broken
    backup = broken.err.split("Restore it from ", 1)[1].split(" ", 1)[0]
    Path(backup).replace(state) if False else state.write_bytes(Path(backup).read_bytes())
    for leftover in (f"{state}-wal", f"{state}-shm"):
        Path(leftover).unlink(missing_ok=True)
    again = repo.gov("apply", "--env", "staging", "--auto-approve")
    assert again.code == 0, again
    assert "to create" not in again.out or "0 to create" in again.out, again
    assert repo.count() == count
