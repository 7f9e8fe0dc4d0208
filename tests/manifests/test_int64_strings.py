"""A 64-bit integer in a manifest may be written as a string, as in a request (contract
section 12, issue 43): it is the number it writes, in the plan, the request, the state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli
from testkit import without_settings

MANIFESTS = """\
apiVersion: govsync/v1
kind: LogQuery
metadata: {name: last-hour}
spec:
  query: {query: "resource.name:orders", relativeTime: "3600"}
---
apiVersion: govsync/v1
kind: Policy
metadata: {name: hours}
spec:
  code: "package formal.v2\\n\\nsession := {\\"action\\": \\"allow\\"}\\n"
  userEmail: ann@example.com
---
apiVersion: govsync/v1
kind: PolicySuspension
metadata: {name: on-call}
spec:
  policyRef: hours
  identityId: usr-ann
  expirationMinutes: "480"
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "a.yaml").write_text(MANIFESTS)
    return tmp_path


def test_digits_in_a_string_are_a_valid_64_bit_integer(project: Path) -> None:
    done = run("validate", "manifests")
    assert done.exit_code == 0, done.output


def test_other_strings_are_not(project: Path) -> None:
    (project / "manifests" / "a.yaml").write_text(MANIFESTS.replace('"3600"', '"1h"'))
    done = run("validate", "manifests")
    assert done.exit_code == 1
    assert "spec.query.relativeTime: must be an integer, not the string '1h'" in done.output


def test_the_string_is_sent_and_recorded_as_the_number(project: Path) -> None:
    (project / "manifests" / "a.yaml").write_text(MANIFESTS.split("---")[0])
    applied = run("apply", "manifests", "--endpoint", "local", "--auto-approve")
    assert applied.exit_code == 0, applied.output
    shown = run("state", "show", "LogQuery/last-hour", "--endpoint", "local")
    assert json.loads(shown.output)["spec"]["query"]["relativeTime"] == 3600
    again = run("plan", "manifests", "--endpoint", "local", "--detailed-exitcode")
    assert again.exit_code == 0, again.output
