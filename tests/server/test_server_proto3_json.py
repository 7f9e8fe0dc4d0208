"""What a client generated from the service's schema sends that the spec does not show
(issue 43): 64-bit integers written as strings (proto3's JSON form), and gzip bodies
(``Content-Encoding: gzip``, which Connect clients may send; bounded by what they hold
once decompressed).

Contract section 12: a 64-bit integer field accepts a JSON string as well as a
number in a request; answers carry numbers.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from datetime import datetime, timedelta
from typing import Any

import pytest
from serverkit import VALID, H, InProcess, World, path

from govsync.api.catalog import MAX_REQUEST_BYTES as MAX_BODY


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


# --- gzip bodies ------------------------------------------------------------------


def post_gzip(client: InProcess, op: str, data: bytes, encoding: str = "gzip") -> Any:
    return client.post(path(op), content=data, headers={
        **H, "Content-Type": "application/json", "Content-Encoding": encoding})


def test_a_gzip_body_is_read(client: InProcess) -> None:
    body = json.dumps({"name": "zipped", "description": "é" * 1000}).encode()
    answer = post_gzip(client, "CreateSpace", gzip.compress(body))
    assert answer.status_code == 200, answer.text
    assert answer.json()["space"]["description"] == "é" * 1000
    # Bounded by what it holds once decompressed: just under 1 MiB is read.
    near = json.dumps({"name": "near", "description": "x" * (MAX_BODY - 100)}).encode()
    assert len(near) <= MAX_BODY
    assert post_gzip(client, "CreateSpace", gzip.compress(near)).status_code == 200


def test_a_gzip_bomb_is_refused_without_being_inflated(client: InProcess) -> None:
    """256 MiB of zeros in 256 KiB: 400 once the first MiB is out, never held whole."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * (1024 * 1024)
    bomb = b"".join([deflate.compress(b'{"name": "')]
                    + [deflate.compress(block) for _ in range(256)] + [deflate.flush()])
    assert len(bomb) < MAX_BODY // 2
    tracemalloc.start()
    try:
        answer = post_gzip(client, "CreateSpace", bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"] == "the request body exceeds 1 MiB once decompressed"
    assert peak < 16 * MAX_BODY, peak


@pytest.mark.parametrize(("data", "encoding", "message"), [
    (b"not gzip", "gzip", "the request body is not valid gzip"),
    (gzip.compress(b'{"name": "a"}')[:-6], "gzip", "the request body is not valid gzip"),
    (gzip.compress(b'{"name": "a"}') + b"junk", "gzip", "the request body is not valid gzip"),
    (b'{"name": "a"}', "br", "Content-Encoding must be gzip or identity"),
    (gzip.compress(gzip.compress(b'{"name": "a"}')), "gzip, gzip",
     "Content-Encoding must be gzip or identity"),
], ids=["not-gzip", "truncated", "trailing-junk", "br", "twice"])
def test_what_is_not_gzip_or_identity_is_a_400(client: InProcess, data: bytes, encoding: str,
                                               message: str) -> None:
    answer = post_gzip(client, "CreateSpace", data, encoding)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "invalid_request"
    assert answer.json()["message"].startswith(message)


def test_encodings_keep_the_spec_conventions(client: InProcess) -> None:
    """An unknown operation is still the spec's JSON 404; CreatePermission answers in the
    Connect error shape; identity is the body as it is."""
    unknown = post_gzip(client, "CreateSpace", b"x", "br")
    assert unknown.status_code == 400
    gone = client.post("/core.v1.SpaceService/CreateNothing", content=gzip.compress(b"{}"),
                       headers={**H, "Content-Type": "application/json",
                                "Content-Encoding": "gzip"})
    assert (gone.status_code, gone.json()["code"]) == (404, "not_found")
    refused = post_gzip(client, "CreatePermission", b"{}", "br")
    assert refused.status_code == 400 and set(refused.json()) == {"message", "details"}
    plain = post_gzip(client, "CreateSpace", b'{"name": "plain"}', "identity")
    assert plain.status_code == 200, plain.text
