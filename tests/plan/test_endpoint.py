"""State records the endpoint it was applied against (contract section 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_helpers import Gov, edit

CLOSED = ("--endpoint", "http://127.0.0.1:9")  # nobody listens: nothing can be sent there


def test_plan_warns_and_apply_refuses_another_endpoint(gov: Gov, applied: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVSYNC_API_KEY", "some-key")
    assert gov.snapshot().endpoint == "local"
    # Hooks only: no live check, so the plan says what changed endpoint means.
    plan = gov.plan(applied, *CLOSED, "--target", "Hook/*")
    (check,) = [c for c in plan["checks"] if c["name"] == "endpoint"]
    assert check["status"] == "warning"
    assert "applied against local, not http://127.0.0.1:9" in check["detail"]
    # With policies, an endpoint that cannot be read fails the plan (issue 23: a wrong
    # CI endpoint must not give a green pull request), naming it and why.
    # An endpoint the state does not record is sent nothing (not the key either): the
    # plan fails, naming both endpoints.
    unreachable = gov.run("plan", applied, *CLOSED, code=1)
    assert "cannot run the live checks (ListGroups): workspace" in unreachable.stderr
    assert "applied against local, not http://127.0.0.1:9" in unreachable.stderr
    assert "nothing is sent to an endpoint the workspace's state does not record" \
        in unreachable.stderr

    # Nothing to do: a no-op apply needs no endpoint at all.
    gov.run("apply", applied, *CLOSED, "--auto-approve")

    edit(applied / "hooks.yaml", "timeoutMs: 1500   # policies fail closed after 1.5 s",
         "timeoutMs: 2500")
    serial = gov.snapshot().serial
    refused = gov.run("apply", applied, *CLOSED, "--auto-approve", code=1)
    assert "was applied against local, not http://127.0.0.1:9" in refused.stderr
    assert "--allow-endpoint-change" in refused.stderr
    assert gov.snapshot().serial == serial  # nothing written

    allowed = gov.run("apply", applied, *CLOSED, "--auto-approve", "--allow-endpoint-change",
                      code=1)
    assert "--allow-endpoint-change" not in allowed.stderr  # it went on (and found no server)
    # Issue 23: nothing reached the new endpoint, so it is not recorded either.
    assert gov.snapshot().endpoint == "local"
