"""Approvals sign deletes (issue 33): prod requires two signed approvals, and a plan
with a delete applies with them; a delete added after the signatures is refused however
it is brought in (a new plan carrying the old signatures, the signed plan edited, the
signed review made again at merge with the delete in the manifests), and the object
stays on the server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from govkit import HOOK, Repo


def removed(repo: Repo, name: str) -> None:
    """Hook ``name``'s manifest taken out, a Removed document (destroy: true) in its place."""
    (repo.root / "manifests" / f"{name}.yaml").unlink()
    (repo.root / "manifests" / f"removed-{name}.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Removed\n"
        f"metadata: {{name: drop-{name}}}\nspec: {{from: Hook/{name}, destroy: true}}\n")


def sign(repo: Repo, plan: Path, *keys: Path) -> None:
    for key in keys:
        signed = repo.gov("approve", "--yes", str(plan), "--key", str(key))
        assert signed.code == 0, signed


def test_approvals_sign_deletes_and_a_delete_added_later_is_refused(repo: Repo) -> None:
    for name in ("spare", "extra"):
        (repo.root / "manifests" / f"{name}.yaml").write_text(HOOK.format(name=name))
    alice, bob = repo.key("alice"), repo.key("bob")
    first = repo.approved_apply(alice, bob)
    assert first.code == 0, first
    assert {"risk", "spare", "extra"} <= set(repo.hooks())

    # A signed plan with a delete applies.
    removed(repo, "spare")
    plan = repo.root / "delete.json"
    made = repo.gov("plan", "--env", "prod", "--out", str(plan))
    assert made.code == 0, made
    assert "Hook/spare" in made.out and "delete" in made.out, made
    unsigned = repo.gov("apply", "--env", "prod", str(plan))
    assert unsigned.code == 1 and "needs 2 approvals" in unsigned.err, unsigned
    assert "spare" in repo.hooks()
    sign(repo, plan, alice, bob)
    applied = repo.gov("apply", "--env", "prod", str(plan))
    assert applied.code == 0, applied
    assert "spare" not in repo.hooks()

    # A plan signed without a delete; the delete is added after the signatures.
    repo.set_timeout(2500)
    review = repo.root / "update.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(review)).code == 0
    sign(repo, review, alice, bob)
    signed_text = review.read_text()
    removed(repo, "extra")
    # 1. A new plan, with the delete, under the signatures of the old one.
    later = repo.root / "later.json"
    made = repo.gov("plan", "--env", "prod", "--out", str(later))
    assert made.code == 0 and "Hook/extra" in made.out, made
    shutil.copy(f"{review}.sig", f"{later}.sig")
    carried = repo.gov("apply", "--env", "prod", str(later))
    assert carried.code == 1 and "nothing was sent" in carried.err, carried
    assert "needs 2 approvals" in carried.err, carried
    # 2. The signed plan itself, edited to carry the delete.
    delete = next(c for c in json.loads(later.read_text())["changes"]
                  if c["address"] == "Hook/extra")
    assert delete["action"] == "delete"
    edited = json.loads(review.read_text())
    edited["changes"] = [delete if c["address"] == "Hook/extra" else c
                         for c in edited["changes"]]
    assert edited["changes"] != json.loads(signed_text)["changes"]
    review.write_text(json.dumps(edited))
    forged = repo.gov("apply", "--env", "prod", str(review))
    assert forged.code == 1 and "was changed after it was made" in forged.err, forged
    assert "nothing was sent" in forged.err, forged
    # 3. The signed review made again at merge, where the manifests now delete.
    review.write_text(signed_text)
    merged = repo.gov("apply", "--env", "prod", "--reviewed", str(review), "--auto-approve")
    assert merged.code == 1 and "differs from the reviewed" in merged.err, merged
    assert "Hook/extra" in merged.err, merged
    hooks = repo.hooks()
    assert "extra" in hooks and hooks["risk"]["timeoutMs"] == 1500  # nothing was sent
