"""Secrets inside a variant whose fields the API leaves open.

A connector AI provider's ``config.providerA`` is free-form, yet real
providers put an API key there.  A ``{fromEnv: VAR}`` anywhere inside such a
variant is a secret like every other: the request carries the variable's
value, state holds only its fingerprint, the plan shows ``(sensitive)``, and
a changed value is a change (an update: the kind is replaced whole).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import Govsync, Server, doc, write_docs

pytestmark = pytest.mark.slow

VAR = "GOVSYNC_TEST_AI_KEY"


def provider(key: dict[str, str] | str) -> dict[str, object]:
    return {"connectorRef": "ai-conn",
            "config": {"providerA": {"endpoint": "https://ai.example", "auth": {"apiKey": key},
                                     "headers": [{"name": "x-team", "value": "data"}]}}}


def write(directory: Path, spec: dict[str, object]) -> Path:
    write_docs(directory / "ai.yaml", [doc("Connector", "ai-conn", {}),
                                       doc("ConnectorAIProvider", "assistant", spec)])
    return directory


def test_a_secret_inside_an_open_variant_is_sent_fingerprinted_and_rotated(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        state_url: str, tmp_path: Path) -> None:
    server = serve()
    gov = make_govsync(state_url, server.url)
    first, second = f"key-{uuid.uuid4().hex}", f"key-{uuid.uuid4().hex}"
    manifests = write(tmp_path / "m", provider({"fromEnv": VAR}))

    planned = gov.invoke("plan", str(manifests), "--format", "markdown", env={VAR: first})
    assert planned.code == 0, planned
    assert "(sensitive)" in planned.out, planned
    applied = gov.run("apply", str(manifests), "--auto-approve", env={VAR: first})
    assert applied.code == 0, applied

    # The server got the value, not the mapping {"fromEnv": ...}.
    (stored,) = server.objects()["ConnectorAIProvider"]
    assert stored["config"]["providerA"]["auth"]["apiKey"] == first
    # State holds a fingerprint in its place, and the rest of the variant as written.
    entry = json.loads(gov.invoke("state", "show", "ConnectorAIProvider/assistant").out)
    assert entry["spec"]["config"]["providerA"]["auth"]["apiKey"].startswith("hmac-sha256:")
    assert entry["spec"]["config"]["providerA"]["headers"] == [{"name": "x-team", "value": "data"}]

    same = gov.invoke("plan", str(manifests), "--format", "json", env={VAR: first})
    assert json.loads(same.out)["summary"]["update"] == 0, same

    # A new value is an update of the replace-all kind, shown without either value.
    rotated = gov.invoke("plan", str(manifests), "--format", "json", env={VAR: second})
    assert rotated.code == 0, rotated
    (change,) = [c for c in json.loads(rotated.out)["changes"] if c["action"] != "no-op"]
    assert change["address"] == "ConnectorAIProvider/assistant"
    assert change["action"] == "update"
    assert change["fields"] == ["config.providerA.auth.apiKey"]
    text = gov.invoke("plan", str(manifests), env={VAR: second})
    assert "(sensitive)" in text.out and "hmac-sha256" not in text.out, text
    # Through a saved plan: it holds the variable and a fingerprint, never the value.
    saved = tmp_path / "rotate.plan"
    assert gov.run("plan", str(manifests), "--out", str(saved), env={VAR: second}).code == 0
    assert second not in saved.read_text() and VAR in saved.read_text()
    applied = gov.run("apply", str(saved), env={VAR: second})
    assert applied.code == 0, applied
    (stored,) = server.objects()["ConnectorAIProvider"]
    assert stored["config"]["providerA"]["auth"]["apiKey"] == second

    # Without the variable there is no plan at all.
    unset = gov.invoke("plan", str(manifests), env={VAR: None})
    assert unset.code == 1 and VAR in unset.err, unset

    everything = "".join(gov.transcript)
    assert first not in everything and second not in everything
    assert first not in Path(state_url).read_bytes().decode("latin-1") if not \
        state_url.startswith("postgres") else True


@pytest.mark.parametrize(("key", "message"), [
    ({"fromEnv": "1BAD"}, "fromEnv must name an environment variable"),
    ({"fromEnv": VAR, "literal": "x"}, "a secret is {fromEnv: VARIABLE} and nothing else"),
])
def test_a_malformed_secret_inside_an_open_variant_is_a_validation_error(
        tmp_path: Path, make_govsync: Callable[..., Govsync], key: dict[str, str],
        message: str) -> None:
    gov = make_govsync(str(tmp_path / "state.db"), None)
    manifests = write(tmp_path / "m", provider(key))
    run = gov.invoke("validate", str(manifests))
    assert run.code == 1, run
    assert "spec.config.providerA.auth.apiKey" in run.err and message in run.err, run
