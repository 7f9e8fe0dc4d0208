"""What a client generated from the service's schema sends that the spec does not show
(issue 43): 64-bit integers written as strings (proto3's JSON form), and gzip bodies.

Contract section 12: a 64-bit integer field accepts a JSON string as well as a
number in a request; answers carry numbers.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from serverkit import VALID, H, InProcess, World, path


def call(client: InProcess, op: str, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post(path(op), json=body, headers=H)
    assert response.status_code == status, response.text
    return response.json()


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp[:26] + "+00:00")


def test_a_log_querys_relative_time_may_be_a_string_and_is_answered_as_a_number(
        client: InProcess) -> None:
    query = {"query": "resource.name:orders", "relativeTime": "3600"}
    created = call(client, "CreateLogQuery", {"name": "q", "query": query})
    read = call(client, "GetLogQuery", {"id": created["id"]})["metadata"]
    assert read["query"]["relativeTime"] == 3600
    sent = {**read, "query": {**read["query"], "relativeTime": "-86400"}}
    updated = call(client, "UpdateLogQueryV2", {"metadata": sent})["metadata"]
    assert updated["query"]["relativeTime"] == -86400
    listed = call(client, "ListLogQueries", {"limit": 10})["savedQueries"]
    assert [q["query"]["relativeTime"] for q in listed] == [-86400]


def test_a_suspensions_minutes_may_be_a_string(client: InProcess, world: World) -> None:
    body = {**VALID["CreatePolicySuspension"](world), "expirationMinutes": "90"}
    suspension = call(client, "CreatePolicySuspension", body)["policySuspension"]
    lasted = _instant(suspension["expireAt"]) - _instant(suspension["createdAt"])
    assert lasted == timedelta(minutes=90)



def test_the_largest_unsigned_64_bit_string_ends_after_9999_a_clean_400(
        client: InProcess, world: World) -> None:
    body = {**VALID["CreatePolicySuspension"](world), "expirationMinutes": str(2**64 - 1)}
    error = call(client, "CreatePolicySuspension", body, 400)
    assert error["details"]["fieldViolations"][0]["field"] == "expirationMinutes"
