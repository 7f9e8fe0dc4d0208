"""refresh.compare: a live object against what govsync last applied (no server)."""

from __future__ import annotations

from govsync.api.kinds import BY_KIND
from govsync.plan import REFRESH_CHECK, Check, CheckStatus, Plan
from govsync.refresh.compare import outside_changes
from govsync.state.records import FINGERPRINT_PREFIX
from govsync.statuses import Status, status_of
from govsync.values import SENSITIVE

STAMP = "2026-01-01T00:00:00Z"
LATER = "2026-02-01T00:00:00Z"


def test_what_the_server_sets_never_drifts() -> None:
    policy = BY_KIND["Policy"]
    spec = {"name": "p", "description": "d", "code": "allow", "groupName": "admins"}
    answer = {"id": "policy-1", "name": "p", "description": "d", "code": "allow",
              "owners": [{"group": {"id": "g1", "name": "admins", "createdAt": STAMP}}],
              "version": 1, "ast": "", "createdAt": STAMP, "updatedAt": STAMP}
    live = {**answer, "version": 7, "ast": "{...}", "updatedAt": LATER,
            "owners": [{"group": {"id": "g1", "name": "admins", "createdAt": STAMP,
                                  "description": "renamed elsewhere"}}]}
    assert outside_changes(policy, spec, answer, live) == ()


def test_a_changed_field_and_a_default_the_server_filled_in() -> None:
    hook = BY_KIND["Hook"]
    spec = {"name": "h", "code": "c", "allowlistedNetworkHosts": ["a"]}
    answer = {"id": "hook-1", **spec, "status": "draft", "createdAt": STAMP,
              "updatedAt": STAMP}
    live = {**answer, "status": "active", "allowlistedNetworkHosts": ["a", "exfil"],
            "updatedAt": LATER}
    diff = outside_changes(hook, spec, answer, live)
    assert [(d.path, d.before, d.after) for d in diff] == [
        ("allowlistedNetworkHosts[1]", None, "exfil"), ("status", "draft", "active")]


def test_a_removed_field_is_drift() -> None:
    space = BY_KIND["Space"]
    spec = {"name": "s", "description": "d"}
    answer = {"id": "space-1", **spec}
    diff = outside_changes(space, spec, answer, {"id": "space-1", "name": "s"})
    assert [d.path for d in diff] == ["description"]


def test_secrets_are_never_read_never_drift_never_shown() -> None:
    bi = BY_KIND["BIIntegration"]
    spec = {"name": "b", "sync": True,
            "biA": {"biAApiKey": FINGERPRINT_PREFIX + "aa", "biAApiSecret": FINGERPRINT_PREFIX}}
    answer = {"id": "bi-1", "name": "b", "sync": True,
              "biA": {"apiKey": SENSITIVE, "apiSecret": SENSITIVE}}
    live = {"id": "bi-1", "name": "b", "sync": False,
            "biA": {"apiKey": "rotated-in-console", "apiSecret": "s3cret"}}
    diff = outside_changes(bi, spec, answer, live)
    assert [(d.path, d.before, d.after) for d in diff] == [("sync", True, False)]
    assert "rotated-in-console" not in repr(diff) and "s3cret" not in repr(diff)


def test_without_an_answer_the_spec_is_compared_where_the_server_returns_it() -> None:
    config = BY_KIND["DataDiscoveryConfiguration"]
    spec = {"resourceId": "r", "nativeUserId": "n", "database": "orders",
            "schedule": "0 2 * * *", "deletionPolicy": "delete", "path": "public"}
    live = {"id": "ddc-1", "resourceId": "r", "nativeUserId": "n", "database": "orders",
            "schedule": "0 3 * * *", "path": "public", "createdAt": STAMP}
    diff = outside_changes(config, spec, {"id": "ddc-1"}, live)
    # deletionPolicy is input only: not returned, not compared.
    assert [(d.path, d.before, d.after) for d in diff] == [
        ("schedule", "0 2 * * *", "0 3 * * *")]


def test_a_partial_refresh_is_never_synced() -> None:
    plan = Plan("w", "l", 1, "d", [], checks=[Check(
        REFRESH_CHECK, CheckStatus.FAILED, "could not be refreshed: 1 object(s)")])
    status, why = status_of(plan, 0, "", "")
    assert status == Status.ERROR and "could not be refreshed" in why
    plan.checks = [Check(REFRESH_CHECK, CheckStatus.PASSED, "59 recorded object(s) read")]
    assert status_of(plan, 0, "", "")[0] == Status.SYNCED
