"""The resolver: one place fills references and secrets, for plan, apply and drift."""

from __future__ import annotations

import pytest

from govsync.values import (
    KNOWN_AFTER_APPLY,
    SENSITIVE,
    MissingSecret,
    PlannedSecret,
    Ref,
    Resolver,
    SecretRef,
    UnknownId,
    holes,
    scrub,
    shown,
    sought,
)


def fingerprint(value: str) -> str:
    return f"fp({value})"


TEMPLATE = {
    "spaceId": Ref("Space/a"),
    "logStoreB": {"apiKey": SecretRef("KEY"), "host": "h"},
    # user data that looks like the old markers is data
    "config": {"$ref": "Space/a", "$secret": "KEY"},
}


def test_holes_finds_typed_leaves_only() -> None:
    assert sorted(holes(TEMPLATE)) == [("logStoreB", "apiKey"), ("spaceId",)]


def test_plan_fills_known_ids_and_keeps_the_rest_typed() -> None:
    r = Resolver({"Space/a": "sp-1"}, fingerprint, {"KEY": "s3cret"})
    request, compared = r.plan(TEMPLATE, holes(TEMPLATE))
    assert request["spaceId"] == "sp-1"
    assert request["logStoreB"]["apiKey"] == PlannedSecret("KEY", "fp(s3cret)")
    assert compared["logStoreB"]["apiKey"] == "fp(s3cret)"
    assert request["config"] == {"$ref": "Space/a", "$secret": "KEY"}
    assert TEMPLATE["spaceId"] == Ref("Space/a")  # the template is not changed


def test_plan_of_an_object_not_created_yet() -> None:
    r = Resolver({}, fingerprint, {"KEY": "v"})
    request, compared = r.plan(TEMPLATE, holes(TEMPLATE))
    assert request["spaceId"] == Ref("Space/a")
    assert compared["spaceId"] is KNOWN_AFTER_APPLY
    assert compared != {**compared, "spaceId": "anything"}


def test_plan_raises_for_a_missing_secret_with_its_path() -> None:
    with pytest.raises(MissingSecret) as info:
        Resolver({}, fingerprint, {"KEY": ""}).plan(TEMPLATE, holes(TEMPLATE))
    assert info.value.path == ("logStoreB", "apiKey") and info.value.variable == "KEY"


def test_send_fills_values_and_records_fingerprints() -> None:
    planned, _ = Resolver({}, fingerprint, {"KEY": "v"}).plan(TEMPLATE, holes(TEMPLATE))
    ids = {"Space/a": "sp-9"}
    send, spec, secrets = Resolver(ids, fingerprint, {"KEY": "v"}).send(planned)
    assert send["spaceId"] == spec["spaceId"] == "sp-9"
    assert send["logStoreB"]["apiKey"] == "v" and spec["logStoreB"]["apiKey"] == "fp(v)"
    assert secrets == ["v"]
    assert send["config"] == {"$ref": "Space/a", "$secret": "KEY"}
    with pytest.raises(UnknownId):
        Resolver({}, fingerprint, {"KEY": "v"}).send(planned)


def test_stale_secrets() -> None:
    planned, _ = Resolver({}, fingerprint, {"KEY": "v"}).plan(TEMPLATE, holes(TEMPLATE))
    assert Resolver({}, fingerprint, {"KEY": "v"}).stale_secrets(planned) == []
    assert Resolver({}, fingerprint, {"KEY": "w"}).stale_secrets(planned) == [
        (("logStoreB", "apiKey"), "KEY", "changed since the plan was made")]
    assert Resolver({}, fingerprint, {}).stale_secrets(planned)[0][2] == "is not set"


def test_shown_hides_secrets_and_names_unknown_ids_but_keeps_user_data() -> None:
    assert shown(TEMPLATE) == {
        "spaceId": "(known after apply)",
        "logStoreB": {"apiKey": SENSITIVE, "host": "h"},
        "config": {"$ref": "Space/a", "$secret": "KEY"},
    }


def test_an_answer_is_scrubbed_of_each_secret_inside_strings_and_of_no_short_value() -> None:
    answer = {"name": "exec-dashboards", "note": "key abc123 accepted", "key": "x",
              "abc123": ["x", "abc123"], "id": "abc123"}
    assert sought(["x", "abc123", "", "abc1234", "abc123"]) == ["abc1234", "abc123"]
    assert scrub(answer, sought(["abc123", "x"]), keep={"id"}) == {
        "name": "exec-dashboards", "note": f"key {SENSITIVE} accepted", "key": "x",
        SENSITIVE: ["x", SENSITIVE], "id": "abc123"}
    assert scrub(answer, sought(["x"])) is answer
