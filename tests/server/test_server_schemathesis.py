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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from serverkit import KEY, SEED, H

from govsync.api.catalog import BY_PATH, SPEC, Verb
from govsync.server import Operations, Store, create_app

OPENAPI = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"
# Generated requests per operation and phase; the whole test stays well under 30 s.
MAX_EXAMPLES = 5

CONFIG = schemathesis.Config.from_dict({
    "seed": 20240131,
    "generation": {"max-examples": MAX_EXAMPLES, "mode": "all", "deterministic": True,
                   "with-security-parameters": False},
    "phases": {"examples": {"enabled": False}, "coverage": {"enabled": True, "unexpected-methods": [],
                            "generation": {"mode": "positive"}},
               "stateful": {"enabled": False}},
    "checks": {"unsupported_method": {"enabled": False}},
})


def _app(operations: Operations = Operations.ALL) -> Any:
    store = Store()
    store.load_seed(SEED)
    return create_app(store, api_keys=[KEY], operations=operations)


schema = schemathesis.openapi.from_path(str(OPENAPI), config=CONFIG)
schema.app = _app()
# `govsync serve --operations spec`: the spec's operations behave exactly the same.
spec_schema = schemathesis.openapi.from_path(str(OPENAPI), config=CONFIG).include(
    operation_id=[op.name for op in SPEC])
spec_schema.app = _app(Operations.SPEC)


def _whole_floats_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_floats_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_floats_as_ints(v) for v in value]
    return value


def _send(case: schemathesis.Case) -> None:
    if isinstance(case.body, dict):
        case.body = _whole_floats_as_ints(case.body)
        if BY_PATH[case.operation.path].verb == Verb.LIST \
                and not case.meta.generation.mode.is_negative:
            case.body.pop("cursor", None)
    case.call_and_validate(headers=H)


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_server_agrees_with_openapi(case: schemathesis.Case) -> None:
    _send(case)


@spec_schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_spec_only_server_agrees_with_openapi(case: schemathesis.Case) -> None:
    _send(case)
