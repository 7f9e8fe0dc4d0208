"""schemathesis against the reference server in-process, with the committed OpenAPI document.

Every operation of ``schemas/openapi.json`` gets a bounded number of
generated requests, valid and invalid, sent to ``create_app`` through
schemathesis' ASGI transport.  Each answer must not be a 5xx, must be a
status, content type and body the document declares, and must agree with
the document: a request the document calls valid is not refused with a 400,
one it calls invalid is refused.  That last pair is what keeps the document
as strict as the server (and the server as strict as the document).

Two rules of the server are outside what JSON Schema can say, so the
generated requests are adjusted before they are sent (the server's
behaviour on them has tests of its own):

- an integer written with a fraction, ``111.0``, is refused (400): JSON
  Schema 2020-12 counts it as the integer 111, so whole floats are sent
  as integers (``test_server_validation.py``);
- a List's ``cursor`` (ListGroups' and every other) is valid only when
  this server issued it: a generated one is dropped from a request meant to
  be valid (``test_server_groups.py``).

Any other method than POST answers 404 not_found, as every unknown route
does (the spec's error table has no 405): that check is off.

The requests are made as each test runs, not as the module is collected
(schemathesis' ``schema.parametrize()`` builds every operation's cases, its
coverage phase included, at collection: once in each xdist worker, about
twelve CPU-seconds each).  The tests are parametrised by the document's
operation labels instead, and each builds its own operation's hypothesis test
the way that plugin does (``build_operation_test``) and runs it: the same
cases, the same checks, made once per run.
"""

from __future__ import annotations

import functools
import json
import unittest
from pathlib import Path
from typing import Any

import pytest
from serverkit import KEY, SEED, H

from govsync.api.catalog import BY_PATH, SPEC, Verb
from govsync.server import Operations, Store, create_app

OPENAPI = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"
# Generated requests per operation and phase; the whole test stays well under 30 s.
MAX_EXAMPLES = 5



def config(coverage: bool) -> dict[str, Any]:
    """schemathesis' settings: generated cases, and (``coverage``) its coverage phase,
    the boundary values of every field (two thirds of the time)."""
    return {
        "seed": 20240131,
        "generation": {"max-examples": MAX_EXAMPLES, "mode": "all", "deterministic": True,
                       "with-security-parameters": False},
        "phases": {"examples": {"enabled": False},
                   "coverage": {"enabled": coverage, "unexpected-methods": [],
                                "generation": {"mode": "positive"}},
                   "stateful": {"enabled": False}},
        "checks": {"unsupported_method": {"enabled": False}},
    }

_DOCUMENT = json.loads(OPENAPI.read_text(encoding="utf-8"))
# Every operation of the document, as schemathesis labels it ("POST /path").
LABELS = [f"{method.upper()} {path}" for path, item in _DOCUMENT["paths"].items()
          for method in item if method in ("get", "put", "post", "delete", "patch")]
_IDS = {f"{method.upper()} {path}": op.get("operationId")
        for path, item in _DOCUMENT["paths"].items() for method, op in item.items()
        if isinstance(op, dict)}
SPEC_LABELS = [label for label in LABELS if _IDS[label] in {op.name for op in SPEC}]


def _app(operations: Operations = Operations.ALL) -> Any:
    store = Store()
    store.load_seed(SEED)
    return create_app(store, api_keys=[KEY], operations=operations)


@functools.cache
def _schema(operations: Operations) -> tuple[Any, Any]:
    """The document loaded by schemathesis, sending to an app serving ``operations``
    (``govsync serve --operations spec``: the spec's operations behave exactly the
    same, the same handlers, so their boundary values are sent to the full server
    only), and the feedback its plugin gives every operation's test; one a worker."""
    import schemathesis
    from schemathesis.checks import load_all_checks
    from schemathesis.generation.feedback import FeedbackSources
    from schemathesis.python._constants.orchestrator import make_constants_value_source

    load_all_checks()
    schema = schemathesis.openapi.from_path(
        str(OPENAPI),
        config=schemathesis.Config.from_dict(config(coverage=operations is Operations.ALL)))
    schema.app = _app(operations)
    return schema, FeedbackSources(constants_value_source=make_constants_value_source(schema))


def _whole_floats_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_floats_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_floats_as_ints(v) for v in value]
    return value


def _send(case: Any) -> None:
    if isinstance(case.body, dict):
        case.body = _whole_floats_as_ints(case.body)
        if BY_PATH[case.operation.path].verb == Verb.LIST \
                and not case.meta.generation.mode.is_negative:
            case.body.pop("cursor", None)
    case.call_and_validate(headers=H)


def _run(operations: Operations, label: str) -> None:
    """What ``schema.parametrize()``'s test of the operation ``label`` does, run now:
    its generated and coverage cases, each sent and checked; a failure is reported as
    that plugin reports it, and a case that cannot be generated fails the test
    (rather than skipping it)."""
    from hypothesis import HealthCheck, settings
    from hypothesis.errors import FailedHealthCheck, Unsatisfiable
    from schemathesis.core.failures import FailureGroup, as_reported_failure
    from schemathesis.generation.hypothesis.reporting import ignore_hypothesis_output
    from schemathesis.pytest._test_builder import build_operation_test

    schema, feedback = _schema(operations)
    operation = schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is not an operation of {OPENAPI.name}"

    @settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def send(case: Any) -> None:
        _send(case)

    test = build_operation_test(config=schema.config, operation=operation, test_func=send,
                                given_kwargs={}, feedback=feedback)
    try:
        with ignore_hypothesis_output():
            test()
    except FailureGroup as exc:
        raise as_reported_failure(exc) from None
    except (unittest.SkipTest, FailedHealthCheck, Unsatisfiable) as exc:
        pytest.fail(f"{label}: its cases could not be made: {exc!r}")


@pytest.mark.parametrize("label", LABELS)
def test_server_agrees_with_openapi(label: str) -> None:
    _run(Operations.ALL, label)


@pytest.mark.parametrize("label", SPEC_LABELS)
def test_spec_only_server_agrees_with_openapi(label: str) -> None:
    _run(Operations.SPEC, label)
