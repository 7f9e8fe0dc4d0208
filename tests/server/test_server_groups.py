"""ListGroups over 1,000 seeded groups: keyset paging, order, search, filter, cursors."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from serverkit import VIEWER, InProcess, make_app, path

URL = path("ListGroups")
V = {"X-API-KEY": VIEWER}
N = 1000


def _group(i: int) -> dict[str, Any]:
    # Names repeat (ties broken by id) and sort in another order than ids;
    # createdAt is a permutation of the ids' order.
    return {
        "id": f"grp-{i:04d}",
        "name": f"team-{(i * 37) % 500:03d}",
        "description": ("Even" if i % 2 == 0 else "odd") + f" group number {i}",
        "dsyncGroupId": f"dsync-{i % 10}",
        "terminationProtection": i % 3 == 0,
        "createdAt": f"2024-01-01T00:{(i * 7) % N // 60:02d}:{(i * 7) % N % 60:02d}.{i:09d}Z",
        "updatedAt": "2024-06-01T00:00:00.000000000Z",
    }


GROUPS = [_group(i) for i in range(N)]


@pytest.fixture(scope="module")
def client() -> Iterator[InProcess]:
    app, _ = make_app(seed={"groups": GROUPS})
    with InProcess(app) as c:
        yield c


def list_groups(client: InProcess, **body: Any) -> dict[str, Any]:
    response = client.post(URL, json=body, headers=V)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def page_through(client: InProcess, limit: int, **query: Any) -> list[str]:
    ids: list[str] = []
    cursor = ""
    while True:
        result = list_groups(client, limit=limit, cursor=cursor, **query)
        meta = result["listMetadata"]
        assert len(result["groups"]) <= limit
        assert meta["before"] == cursor and meta["after"] == meta["nextCursor"]
        ids.extend(g["id"] for g in result["groups"])
        cursor = meta["nextCursor"]
        if not cursor:
            assert len(ids) == meta["count"]
            return ids
        assert len(result["groups"]) == limit


# The boundaries of paging N = 1000 groups: the smallest and largest limits, limits
# that divide N (the last page is full) and their neighbours (a short last page, or
# one more page of one group), a prime, and the default.
LIMITS = [1, 2, 3, 7, 49, 50, 51, 99, 100, 101, 124, 125, 126, 199, 200, 201, 333,
          499, 500]


@pytest.mark.parametrize("limit", LIMITS)
def test_every_limit_returns_every_group_exactly_once(client: InProcess, limit: int) -> None:
    expected = [g["id"] for g in sorted(GROUPS, key=lambda g: (g["name"], g["id"]))]
    assert page_through(client, limit) == expected, limit


def test_count_is_the_total_and_default_limit_is_50(client: InProcess) -> None:
    result = list_groups(client)
    assert len(result["groups"]) == 50
    assert result["listMetadata"]["count"] == N
    assert result["listMetadata"]["before"] == ""
    assert result["listMetadata"]["nextCursor"]


@pytest.mark.parametrize(("order", "field", "descending"), [
    ("", "name", False), ("name", "name", False), ("name asc", "name", False),
    ("-name", "name", True), ("name desc", "name", True),
    ("createdAt", "createdAt", False), ("createdAt desc", "createdAt", True),
    ("-updatedAt", "updatedAt", True), ("id", "id", False), ("-id", "id", True),
])
def test_order(client: InProcess, order: str, field: str, descending: bool) -> None:
    expected = [g["id"] for g in sorted(GROUPS, key=lambda g: (g[field], g["id"]),
                                        reverse=descending)]
    assert page_through(client, 137, order=order) == expected


def test_search_is_a_case_insensitive_substring_of_name_and_description(client: InProcess) -> None:
    expected = [g["id"] for g in GROUPS if "even" in g["description"].lower()]
    assert sorted(page_through(client, 100, search="EVEN", order="id")) == expected
    by_name = [g["id"] for g in GROUPS if "team-01" in g["name"]]
    assert sorted(page_through(client, 7, search="Team-01", order="id")) == by_name
    assert by_name and len(by_name) < N


def test_search_fields(client: InProcess) -> None:
    in_dsync = [g["id"] for g in GROUPS if "dsync-3" in g["dsyncGroupId"]]
    assert page_through(client, 33, search="dsync-3", searchFields=["dsyncGroupId"],
                        order="id") == in_dsync
    assert list_groups(client, search="dsync-3")["listMetadata"]["count"] == 0
    only_name = list_groups(client, search="group number", searchFields=["name"])
    assert only_name["listMetadata"]["count"] == 0


def test_field_filters(client: InProcess) -> None:
    def count(filter_: dict[str, Any]) -> int:
        result: int = list_groups(client, filter=filter_)["listMetadata"]["count"]
        return result

    protected = sum(1 for g in GROUPS if g["terminationProtection"])
    assert count({"field": {"key": "terminationProtection",
                            "value": {"type": "bool", "value": "true"}}}) == protected
    assert count({"field": {"key": "name", "value": {"value": "team-037"}}}) == 2
    assert count({"field": {"key": "id", "value": {"type": "string", "value": "grp-0001"}}}) == 1
    assert count({"field": {"key": "name", "value": {"value": "nobody"}}}) == 0


def test_group_filters_are_an_and_of_their_subfilters(client: InProcess) -> None:
    both = {"group": {"filters": [
        {"field": {"key": "dsyncGroupId", "value": {"value": "dsync-4"}}},
        {"group": {"filters": [
            {"field": {"key": "terminationProtection", "value": {"type": "bool", "value": "false"}}},
        ]}},
    ]}}
    expected = [g["id"] for g in GROUPS
                if g["dsyncGroupId"] == "dsync-4" and not g["terminationProtection"]]
    assert page_through(client, 9, filter=both, order="id") == expected
    assert list_groups(client, filter={"group": {"filters": []}})["listMetadata"]["count"] == N


def test_filter_search_and_order_combine(client: InProcess) -> None:
    query = {"filter": {"field": {"key": "dsyncGroupId", "value": {"value": "dsync-2"}}},
             "search": "even", "order": "-createdAt"}
    expected = [g["id"] for g in sorted(GROUPS, key=lambda g: (g["createdAt"], g["id"]),
                                        reverse=True)
                if g["dsyncGroupId"] == "dsync-2" and "even" in g["description"].lower()]
    assert page_through(client, 11, **query) == expected


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_bad_bool_filter_value_is_400(client: InProcess, value: str) -> None:
    response = client.post(URL, headers=V, json={"filter": {"group": {"filters": [
        {"field": {"key": "terminationProtection", "value": {"type": "bool", "value": value}}}]}}})
    assert response.status_code == 400
    assert response.json()["details"]["fieldViolations"][0]["field"] == \
        "filter.group.filters.0.field.value.value"


def test_number_filter(client: InProcess) -> None:
    bad = client.post(URL, headers=V, json={"filter": {"field": {
        "key": "name", "value": {"type": "number", "value": "many"}}}})
    assert bad.status_code == 400
    none = list_groups(client, filter={"field": {"key": "name",
                                                 "value": {"type": "number", "value": "3"}}})
    assert none["listMetadata"]["count"] == 0


@pytest.mark.parametrize("cursor", [
    "not base64 !!", "bm90IGpzb24", base64.urlsafe_b64encode(b'{"k": 1}').decode(),
    base64.urlsafe_b64encode(b"[1, 2]").decode(),
    base64.urlsafe_b64encode(json.dumps({"k": ["a", "b"], "q": "0" * 16}).encode()).decode(),
])
def test_bad_cursor_is_400(client: InProcess, cursor: str) -> None:
    response = client.post(URL, json={"cursor": cursor}, headers=V)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"]["fieldViolations"][0]["field"] == "cursor"


def test_cursor_of_another_query_is_400(client: InProcess) -> None:
    cursor = list_groups(client, limit=10)["listMetadata"]["nextCursor"]
    assert list_groups(client, limit=25, cursor=cursor)["groups"]  # another limit is fine
    for other in ({"order": "-name"}, {"search": "x"},
                  {"filter": {"field": {"key": "name", "value": {"value": "x"}}}}):
        response = client.post(URL, json={"cursor": cursor, **other}, headers=V)
        assert response.status_code == 400, other
        assert response.json()["details"]["fieldViolations"][0]["field"] == "cursor"


def test_new_groups_invalidate_cached_listings() -> None:
    app, store = make_app(seed={"groups": GROUPS[:5]})
    with InProcess(app) as client:
        assert list_groups(client)["listMetadata"]["count"] == 5
        store.load_seed({"groups": GROUPS[5:8]})
        assert list_groups(client)["listMetadata"]["count"] == 8
