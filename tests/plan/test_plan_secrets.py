"""Secret values never appear in output, plan files or state (contract section 1).

Each secret variable of the examples gets a unique canary value; every
output and every file govsync writes for itself is searched for it.  The
embedded server's own database (.govsync/local-api.db) is left out: it is
the API's storage, and the API keeps what it is sent.
"""

from __future__ import annotations

import hashlib
import json
import stat
import uuid
from pathlib import Path

import pytest
from click.testing import Result
from plan_helpers import LOCAL, STATE_DB, Gov, by_address, edit, summary

from govsync.state.sqlite import SqliteStore
from testkit import examples

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects

# Secret spec paths of the examples, by variable (examples/README.md).
USED_BY = {
    "GOVSYNC_EXAMPLE_LOGSTORE_API_KEY": ("LogIntegration/security-siem", "logStoreB.apiKey"),
    "GOVSYNC_EXAMPLE_BI_API_KEY": ("BIIntegration/exec-dashboards", "biA.biAApiKey"),
    "GOVSYNC_EXAMPLE_BI_API_SECRET": ("BIIntegration/exec-dashboards", "biA.biAApiSecret"),
    "GOVSYNC_EXAMPLE_MDM_API_KEY": ("MDMIntegration/laptop-fleet", "mdmB.apiKey"),
    "GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY": ("AIProviderIntegration/vendor-a-enterprise", "apiKey"),
}


def canary(tag: str) -> str:
    return f"canary-{uuid.uuid4().hex}-{tag}"


def traces(value: str) -> list[str]:
    """What must not be found: the value, its random part, its plain digests."""
    return [value, value.split("-")[1], hashlib.sha256(value.encode()).hexdigest(),
            hashlib.md5(value.encode()).hexdigest()]


def assert_absent(secrets: list[str], where: str, data: str | bytes) -> None:
    blob = data if isinstance(data, bytes) else data.encode()
    for secret in secrets:
        for trace in traces(secret):
            assert trace.encode() not in blob, f"secret {secret!r} found in {where}"


def own_files(cwd: Path) -> dict[str, bytes]:
    """Every file govsync keeps for itself: state (with -wal/-shm), plans, locks."""
    found = {}
    for path in cwd.rglob("*"):
        if path.is_file() and not path.name.startswith("local-api.db") \
                and "manifests" not in path.parts:
            found[str(path.relative_to(cwd))] = path.read_bytes()
    return found


def test_every_example_secret_variable_is_covered(example_secrets: dict[str, str]) -> None:
    assert set(USED_BY) == set(example_secrets)


def test_secret_canaries_appear_nowhere(gov: Gov, manifests: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    values = {var: canary(var.lower()) for var in USED_BY}
    for var, value in values.items():
        monkeypatch.setenv(var, value)
    secrets = list(values.values())
    runs: list[tuple[str, Result]] = []

    def run(*args: str, code: int = 0) -> Result:
        result = gov.run(*args, code=code)
        runs.append((" ".join(map(str, args)), result))
        return result

    run("validate", manifests)
    for fmt in ("text", "json", "markdown"):
        run("plan", manifests, "--format", fmt, *LOCAL)
    run("plan", manifests, "--out", "p.json", *LOCAL)
    saved = json.loads(Path("p.json").read_text())
    assert saved["summary"]["create"] == N
    run("apply", "p.json", *LOCAL, "--auto-approve")
    run("plan", manifests, "--detailed-exitcode", *LOCAL)
    run("apply", manifests, *LOCAL, "--auto-approve")

    # The plan file holds fingerprints: where each secret goes, never its value.
    for var, (address, path) in USED_BY.items():
        marker = by_address(saved)[address]["request"]
        for key in path.split("."):
            marker = marker[key]
        assert marker["$secret"]["env"] == var
        assert marker["$secret"]["fingerprint"].startswith("hmac-sha256:")

    # Rotate one secret: integrations cannot change, so this is blocked,
    # and both values show only as "(sensitive)".
    old = values["GOVSYNC_EXAMPLE_LOGSTORE_API_KEY"]
    rotated = canary("rotated")
    secrets.append(rotated)
    monkeypatch.setenv("GOVSYNC_EXAMPLE_LOGSTORE_API_KEY", rotated)
    for fmt in ("text", "json", "markdown"):
        run("plan", manifests, "--format", fmt, code=1)
    plan = json.loads(runs[-2][1].stdout)
    assert plan["summary"] == summary(blocked=1, no_op=N - 1)
    change = by_address(plan)["LogIntegration/security-siem"]
    assert change["action"] == "blocked"
    assert change["fields"] == ["logStoreB.apiKey"]
    assert change["diff"] == [{"field": "logStoreB.apiKey", "before": "(sensitive)",
                               "after": "(sensitive)"}]
    assert "(sensitive)" in runs[-3][1].stdout and "(sensitive)" in runs[-1][1].stdout
    run("apply", manifests, *LOCAL, "--auto-approve", code=1)
    assert old != rotated

    for command, result in runs:
        assert_absent(secrets, f"stdout of `govsync {command}`", result.stdout)
        assert_absent(secrets, f"stderr of `govsync {command}`", result.stderr)
    files = own_files(gov.cwd)
    assert str(STATE_DB) in files
    assert "p.json" in files
    for name, data in files.items():
        assert_absent(secrets, name, data)


def test_state_db_and_wal_hold_no_secret(gov: Gov, manifests: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, reading the write-ahead log before SQLite folds it into state.db."""
    values = {var: canary(var.lower()) for var in USED_BY}
    for var, value in values.items():
        monkeypatch.setenv(var, value)
    state = gov.cwd / STATE_DB
    # A reader kept open keeps the -wal file (SQLite removes it on last close).
    with SqliteStore(str(state)) as reader:
        gov.apply_local(manifests)
        assert reader.snapshot("default").entries.keys() == gov.snapshot().entries.keys()
        blobs = {p.name: p.read_bytes() for p in state.parent.glob("state.db*")}
        assert blobs["state.db-wal"], "the log holds the apply's writes"
        for name, blob in blobs.items():
            assert_absent(list(values.values()), name, blob)
    # What the state keeps instead: fingerprints, and the answers scrubbed.
    entries = gov.snapshot().entries
    bi = entries["BIIntegration/exec-dashboards"]
    assert bi.spec["biA"]["biAApiKey"].startswith("hmac-sha256:")
    assert bi.spec["biA"]["biAApiSecret"].startswith("hmac-sha256:")
    # biA answers with its key and secret (API spec): state keeps neither.
    assert bi.response["biA"] == {"apiKey": "(sensitive)", "apiSecret": "(sensitive)"}
    for entry in entries.values():
        assert_absent(list(values.values()), entry.address, json.dumps(entry.as_dict()))
    for name, blob in {p.name: p.read_bytes() for p in state.parent.glob("state.db*")}.items():
        assert_absent(list(values.values()), name, blob)
    # The embedded server's database is the API's storage: it keeps what it was sent,
    # secrets included, so only its owner may read it, as the state.
    for path in state.parent.glob("*.db*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_one_character_secret_never_tears_an_answer_nor_shows_as_a_change(
        gov: Gov, manifests: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret of one character (a placeholder such as ``x``) is no value answers are
    scrubbed of (docs/security.md), on the client's path and on apply's alike: apply
    recorded "exec-dashboards" as "e(sensitive)ec-dashboards", the client read it whole,
    and every later plan and drift showed the object changed outside govsync, which no
    apply could put back."""
    for var in USED_BY:
        monkeypatch.setenv(var, "x")
    gov.apply_local(manifests)
    entries = gov.snapshot().entries
    assert entries["BIIntegration/exec-dashboards"].response["name"] == "exec-dashboards"
    for entry in entries.values():
        assert "(sensitive)" not in json.dumps(entry.response).replace('"(sensitive)"', ""), \
            entry.address
    plan = gov.run("plan", manifests, *LOCAL, "--detailed-exitcode").stdout
    assert "changed outside govsync" not in plan, plan
    drift = gov.run("drift", manifests, *LOCAL, "--format", "json").stdout
    assert json.loads(drift)["inSync"] and json.loads(drift)["drift"] == [], drift


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_plan_with_a_secret_variable_missing_names_it_and_the_address(
        gov: Gov, manifests: Path, monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("GOVSYNC_EXAMPLE_MDM_API_KEY")
    else:
        monkeypatch.setenv("GOVSYNC_EXAMPLE_MDM_API_KEY", value)

    result = gov.run("plan", manifests, code=1)
    assert result.stdout == ""
    place, rest = result.stderr.split(": ", 1)
    file, line, col = place.rsplit(":", 2)
    assert file == "manifests/integrations.yaml"
    # Inside the MDMIntegration document (lines 49-57).
    assert 49 <= int(line) <= 57 and int(col) >= 1
    assert rest == (
        "MDMIntegration/laptop-fleet: environment variable GOVSYNC_EXAMPLE_MDM_API_KEY "
        "(secret spec.mdmB.apiKey) is not set: export it before running govsync\n"
        "1 error; nothing was sent and the state is untouched.\n")
    assert not Path("p.json").exists()


def test_plan_names_every_missing_secret_variable(gov: Gov, manifests: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for var in USED_BY:
        monkeypatch.delenv(var)
    result = gov.run("plan", manifests, code=1)
    lines = result.stderr.splitlines()
    assert lines[-1] == "5 errors; nothing was sent and the state is untouched."
    for var, (address, path) in USED_BY.items():
        assert sum(1 for line in lines if f": {address}: environment variable {var} "
                   f"(secret spec.{path}) is not set" in line) == 1, var


def test_validate_needs_no_secret(gov: Gov, manifests: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for var in USED_BY:
        monkeypatch.delenv(var)
    assert gov.run("validate", manifests).stdout == f"{N} objects in {EXAMPLE.files} files: valid.\n"


AUDIT_ARCHIVE_STORE = """  logStoreA:
    bucketName: northwind-audit-archive
    bucketPrefix: access-logs/
    cloudIntegrationId: cloud-int-prod-eu"""
AUDIT_ARCHIVE_WITH_SECRET = """  logStoreB:
    site: eu1.logstore-b.example
    accountId: northwind-archive
    apiKey: {fromEnv: GOVSYNC_EXAMPLE_LOGSTORE_API_KEY}"""


def test_a_secret_inside_a_changed_parent_is_shown_as_sensitive(gov: Gov, applied: Path) -> None:
    edit(applied / "integrations.yaml", AUDIT_ARCHIVE_STORE, AUDIT_ARCHIVE_WITH_SECRET)

    plan = gov.plan(applied, code=1)
    change = by_address(plan)["LogIntegration/audit-archive"]
    assert change["action"] == "blocked"
    assert change["fields"] == ["logStoreA", "logStoreB"]
    assert change["diff"][1] == {
        "field": "logStoreB", "before": None,
        "after": {"site": "eu1.logstore-b.example", "accountId": "northwind-archive",
                  "apiKey": "(sensitive)"},
    }
    for fmt in ("text", "json", "markdown"):
        out = gov.run("plan", applied, "--format", fmt, code=1).stdout
        assert "hmac-sha256:" not in out, f"a secret's fingerprint is shown in the {fmt} plan"
