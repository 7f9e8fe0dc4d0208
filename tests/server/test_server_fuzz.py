"""Property-based fuzz of every operation: no 5xx, every error in the specified shape.

Bodies come from each request model's JSON Schema (mostly valid ones), from
the known-good body of ``VALID``, from either with one part broken (a key
removed, a value replaced by any JSON, an unknown key added), and from
arbitrary JSON objects; references now and then name existing objects.  The generator below
knows the parts of JSON Schema that pydantic emits for the models.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serverkit import VALID, H, InProcess, World, make_app, path

from govsync.api.catalog import BY_NAME, OPERATIONS, Operation, Verb

# Text includes lone surrogates: JSON can carry them (as \\u escapes).
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(["\ud800", "a\udfffb", "\x00"]))
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), TEXT)
JSON = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)
SECRET = "SECRET-FUZZ-VALUE"


def from_schema(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """A hypothesis strategy for (mostly) valid instances of a JSON Schema."""
    if "$ref" in schema:
        if depth > 3:  # recursive models (group filters): stop nesting
            return st.none()
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, depth + 1)
    if "anyOf" in schema:
        return st.one_of([from_schema(s, defs, depth) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength", 40)
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: low <= len(s) <= high)
        return st.text(min_size=low, max_size=min(high, low + 40))
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**40)), schema.get("maximum", 2**40))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), defs, depth), max_size=3)
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        props = {k: from_schema(v, defs, depth) for k, v in schema["properties"].items()}
        return st.fixed_dictionaries(
            {k: s for k, s in props.items() if k in required},
            optional={k: s for k, s in props.items() if k not in required},
        )
    if kind == "object":
        return st.dictionaries(st.text(max_size=8), JSON, max_size=3)
    return JSON


def _places(value: Any, trail: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every (container path, key) in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*trail, key)
            yield from _places(item, (*trail, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*trail, index)
            yield from _places(item, (*trail, index))


@st.composite
def broken(draw: st.DrawFn, valid: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    body = copy.deepcopy(draw(valid))
    places = list(_places(body))
    how = draw(st.sampled_from(["remove", "replace", "extra"]))
    if how == "extra" or not places:
        body[draw(st.text(min_size=1, max_size=8))] = draw(JSON)
        return body
    place = draw(st.sampled_from(places))
    node: Any = body
    for step in place[:-1]:
        node = node[step]
    if how == "remove":
        del node[place[-1]]
    else:
        node[place[-1]] = draw(JSON)
    return body


def bodies(op: Operation, known_good: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    schema = op.request.model_json_schema()
    valid = from_schema(schema, schema.get("$defs", {}))
    good = st.just(known_good)
    return st.one_of(valid, broken(valid), good, broken(good), broken(good),
                     st.dictionaries(st.text(max_size=10), JSON))


def _with_secrets(op: Operation, body: dict[str, Any]) -> dict[str, Any]:
    """Secret inputs carry a marker, so a test can see whether one is echoed."""
    for dotted in op.secret_paths:
        *parents, last = dotted.split(".")
        node: Any = body
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(last), str):
            node[last] = SECRET + node[last]
    return body


def check_answer(op: Operation, body: dict[str, Any], status: int, answer: Any) -> None:
    assert status in (200, 400, 404), (status, answer)
    assert isinstance(answer, dict)
    if status == 200:
        if op.paged:
            assert list(answer) == [op.response_key, "listMetadata"]
        elif op.response_key:
            assert list(answer) == [op.response_key]
        return
    code = {400: "invalid_request", 404: "not_found"}[status]
    if op.connect:
        assert set(answer) == {"message", "details"} and answer["message"]
        for detail in answer["details"]:
            assert set(detail) == {"type", "value", "debug"}
            assert isinstance(detail["value"], str) and isinstance(detail["debug"], dict)
        types = {d["type"] for d in answer["details"]}
        if status == 400:
            assert answer["details"] and types == {"core.v1.FieldViolation"}
        else:
            assert answer["details"] == [{"type": "core.v1.ErrorCode", "value": code, "debug": {}}]
        return
    assert answer["code"] == code and isinstance(answer["message"], str) and answer["message"]
    if status == 400:
        assert set(answer) == {"code", "message", "details"}
        violations = answer["details"]["fieldViolations"]
        assert violations
        for v in violations:
            assert set(v) == {"field", "description"} and isinstance(v["field"], str)
            assert isinstance(v["description"], str) and v["description"]
    else:
        assert set(answer) == {"code", "message"}


@pytest.fixture  # one server per operation: a delete must not take another's objects
def fuzzed() -> Iterator[InProcess]:
    app, _ = make_app()
    with InProcess(app) as client:
        world = World(client)
        for name in ("space", "connector", "native_user", "policy", "hook", "signing_key"):
            getattr(world, name)  # objects the fuzzed requests can name
        yield client


def _existing(client: InProcess) -> dict[str, list[str]]:
    objects = client.get("/_govsync/objects", headers=H).json()
    return {kind: [o["id"] for o in items if "id" in o] for kind, items in objects.items()}


def _point_at_existing(op: Operation, body: dict[str, Any], data: st.DataObject,
                       existing: dict[str, list[str]]) -> None:
    """Now and then, make a reference name an object that exists, to get past 404."""
    for dotted, kind in op.must_exist:
        *parents, last = dotted.split(".")
        node: Any = body
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node and existing.get(kind) \
                and data.draw(st.booleans()):
            node[last] = data.draw(st.sampled_from(existing[kind]))


@pytest.mark.parametrize("name", [op.name for op in OPERATIONS])
def test_fuzz_operation(fuzzed: InProcess, name: str) -> None:
    op = BY_NAME[name]
    existing = _existing(fuzzed)
    known_good = VALID[name](World(fuzzed))  # type: ignore[arg-type]

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    @given(bodies(op, known_good), st.data())
    def probe(body: dict[str, Any], data: st.DataObject) -> None:
        _point_at_existing(op, body, data, existing)
        body = _with_secrets(op, copy.deepcopy(body))
        content = json.dumps(body).encode()  # ASCII: surrogates travel as escapes
        response = fuzzed.post(op.path, content=content,
                               headers={**H, "Content-Type": "application/json"})
        check_answer(op, body, response.status_code, response.json())
        if response.status_code != 200:
            assert SECRET not in response.text
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    statuses: dict[int, int] = {}
    probe()
    assert statuses.get(400, 0) > 0  # the fuzz reaches validation failures...
    assert statuses.get(200, 0) > 0  # ...and successes
    # The server still answers, and still does its job.
    assert fuzzed.get("/_govsync/health", headers=H).json() == {"status": "ok", "inFlight": 0}
    if op.verb == Verb.DELETE:
        # The fuzz may have deleted a seeded object (a link) no request can make again.
        app, _ = make_app()
        with InProcess(app) as fresh:
            response = fresh.post(path(name), json=VALID[name](World(fresh)), headers=H)
    else:
        response = fuzzed.post(path(name), json=VALID[name](World(fuzzed)),  # type: ignore[arg-type]
                               headers=H)
    assert response.status_code == 200, response.text
