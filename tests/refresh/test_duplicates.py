"""No duplicate from a lost or misplaced state (contract section 12): before a create,
the object is looked up live; one that exists unrecorded blocks the create, in plan,
apply, a saved plan's apply and a reviewed apply, and nothing is sent."""

from __future__ import annotations

from collections import Counter

from refreshkit import NOT_OURS, Gov, copy_examples, lost, not_ours


def counts(gov: Gov) -> Counter[str]:
    from govsync.api.kinds import KINDS

    return Counter({k.name: len(gov.objects(k.name)) for k in KINDS})


def test_a_new_state_against_a_populated_server_creates_nothing(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    before = counts(gov)
    again = lost(gov)
    plan = again.run("plan", manifests, "--format", "json")
    assert plan.code == 1, plan
    body = plan.json()
    blocked = {c["address"]: c for c in body["changes"] if c["action"] == "blocked"}
    hook = blocked["Hook/risk_score"]
    assert not_ours(hook["reason"]) and hook["id"].startswith("hook-"), hook
    # Every named kind, and a connector's AI provider (found by its connector), is found.
    assert "Space/analytics" in blocked and "Policy/mask-pii-in-results" in blocked
    run = again.run("apply", manifests, "--auto-approve")
    assert run.code == 1, run
    assert any(words in run.out + run.err for words in NOT_OURS), run
    assert counts(gov) == before


def test_a_saved_plan_is_checked_again_at_apply_time(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    other = lost(gov, "-other")
    other.ok("plan", manifests, "--out", "plan.json")
    gov.ok("apply", manifests, "--auto-approve")  # meanwhile, another state made them
    before = counts(gov)
    run = other.run("apply", "plan.json", "--auto-approve")
    assert run.code == 1, run
    assert any(words in run.out + run.err for words in NOT_OURS), run
    assert counts(gov) == before
