"""The reference server beside the service's own client (issue 43).

``connect/requests.json`` holds what a Connect client generated from the service's
schema sends for every operation of the reference server the schema has (proto3
JSON: int64 as strings, objects sent back as read, the SDK's field names).  Each is
posted in order to the real reference server, in-process and over TCP (there with
every body gzip-compressed, as a client that compresses its requests sends it), and
each answer must be 200 and decode strictly into the SDK's answer message: no field
the message lacks, none of the fields the SDK's rules require missing.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import connectkit
import httpx
import pytest
import yaml
from connectkit import HEADERS, Probe, at, decode, encode, filled, method, missing, probes
from google.protobuf.json_format import ParseError
from serverkit import KEY, SEED, InProcess, make_app

from govsync.api.catalog import OPERATIONS
from govsync.server import Operations
from testkit import Served

Post = Callable[[str, bytes, dict[str, str]], httpx.Response]

PROBES = probes()


def body_of(probe: Probe, saved: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """The request a client sends: as recorded, or the object an earlier answer held,
    decoded into the SDK's message and encoded again, with ``set`` laid over it."""
    if probe.as_read is None:
        body: dict[str, Any] = filled(probe.request, saved)
        return body
    read = next(p for p in PROBES if p.operation == probe.as_read)
    sent = method(probe.service, probe.operation)
    got = method(read.service, read.operation)
    assert sent is not None and got is not None
    (wrap,) = sent.input_type.fields
    (held,) = (f for f in got.output_type.fields if f.message_type is not None)
    obj = encode(decode(held.message_type, answers[probe.as_read][held.json_name]))
    return {wrap.json_name: {**obj, **filled(probe.set, saved)}}


def replay(post: Post, *, compress: bool = False) -> list[str]:
    """Every probe, in order; one line per failure (all of them, not only the first)."""
    saved: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    failures: list[str] = []
    for probe in PROBES:
        rpc = method(probe.service, probe.operation)
        try:
            body = body_of(probe, saved, answers)
        except (KeyError, ParseError) as exc:
            failures.append(f"{probe.operation}: no request to send ({exc})")
            continue
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = {**HEADERS, "X-API-KEY": KEY}
        if compress:
            data, headers["Content-Encoding"] = gzip.compress(data), "gzip"
        response = post(probe.path, data, headers)
        if response.status_code != 200:
            failures.append(f"{probe.operation} {json.dumps(body)[:160]}: "
                            f"{response.status_code} {response.text[:300]}")
            continue
        answer = response.json()
        answers[probe.operation] = answer
        for name, dotted in probe.save.items():
            saved[name] = at(answer, dotted)
        if probe.setup:
            continue
        assert rpc is not None, f"{probe.operation}: not in the SDK's schema"
        try:
            decode(rpc.output_type, answer)
        except ParseError as exc:
            failures.append(f"{probe.operation}: the SDK's client cannot decode {answer}: {exc}")
        absent = missing(rpc.output_type, answer) + [p for p in probe.present
                                                     if at(answer, p) is None]
        if absent:
            failures.append(f"{probe.operation}: {', '.join(absent)} missing from {answer}")
    return failures


def test_every_operation_the_sdk_has_is_replayed() -> None:
    """The recorded requests cover each operation the server serves that the SDK's
    schema has (the rest, such as NativeUserService's, the SDK does not publish)."""
    in_sdk = {op.name for op in OPERATIONS if method(op.service, op.name) is not None}
    replayed = {p.operation for p in PROBES if not p.setup}
    assert in_sdk - replayed == set()
    assert replayed <= in_sdk
    assert len(in_sdk) >= 90


@pytest.fixture
def in_process() -> Iterator[InProcess]:
    app, _ = make_app(operations=Operations.ALL)
    with InProcess(app) as client:
        yield client


def test_the_services_client_is_answered_in_process(in_process: InProcess) -> None:
    def post(path: str, data: bytes, headers: dict[str, str]) -> httpx.Response:
        return in_process.post(path, content=data, headers=headers)

    assert replay(post) == []


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(SEED))
    server = Served(["--api-key", KEY, "--seed", str(seed)])
    try:
        yield server
    finally:
        server.stop()


def test_the_services_client_is_answered_over_tcp_with_gzip_bodies(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        def post(path: str, data: bytes, headers: dict[str, str]) -> httpx.Response:
            return client.post(path, content=data, headers=headers)

        assert replay(post, compress=True) == []


def test_a_spec_only_server_answers_the_rest_404_as_the_spec_says() -> None:
    """``serve --operations spec`` keeps its rules for this client too: every operation
    api-spec.md does not show is the spec's JSON 404, gzip body or not, as is a GET."""
    app, _ = make_app(operations=Operations.SPEC)
    spec = {op.name for op in OPERATIONS if op.spec}
    with InProcess(app) as client:
        others = [p for p in PROBES if p.operation not in spec]
        assert len(others) > 60
        for probe in others:
            data = gzip.compress(json.dumps(probe.request).encode())
            headers = {**HEADERS, "X-API-KEY": KEY, "Content-Encoding": "gzip"}
            answer = client.post(probe.path, content=data, headers=headers)
            assert answer.status_code == 404, (probe.operation, answer.text)
            assert answer.json()["code"] == "not_found"
        got = client.get(PROBES[0].path, headers={"X-API-KEY": KEY})
        assert (got.status_code, got.json()["code"]) == (404, "not_found")


def test_the_schema_is_the_sdks() -> None:
    """The descriptors are the SDK's own: its services and the messages the findings
    name, as its generated code declares them."""
    report = connectkit.pool().FindMessageTypeByName("core.v1.PolicyReport")
    assert [f.json_name for f in report.fields] == [
        "id", "policyCode", "evaluationStart", "createdAt", "logQuery", "policyId",
        "createdBy", "status"]
    suspension = method("PoliciesService", "CreatePolicySuspension")
    assert suspension is not None
    minutes = suspension.input_type.fields_by_name["expiration_minutes"]
    assert minutes.type == minutes.TYPE_UINT64
    assert method("SidecarService", "CreateSidecar") is None


def test_govsync_reads_a_discovery_configuration_by_the_services_field() -> None:
    """govsync's own Get sends the field the service's message has (its id as
    dataDiscoveryConfigurationId), not ``id``, which the service does not take."""
    from govsync.api.kinds import BY_KIND

    get = BY_KIND["DataDiscoveryConfiguration"].get
    assert get is not None and get.sends == "dataDiscoveryConfigurationId"
    assert BY_KIND["Hook"].get is not None and BY_KIND["Hook"].get.sends == "id"
