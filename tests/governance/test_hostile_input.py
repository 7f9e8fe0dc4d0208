"""Hangs, unbounded work and the smaller holes (issue 21, findings 8 and 9)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from govkit import KEY, Repo

from govsync.values import scrub

# -- 8: FIFOs and a rule over its budget ------------------------------------------------


def fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


def one_line_error(done: object, *needles: str) -> None:
    """Exit 1 and one line of error, last (approve shows the plan before it)."""
    code, err = done.code, done.err  # type: ignore[attr-defined]
    assert code == 1, done
    errors = [ln for ln in err.strip().splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and err.strip().endswith(errors[0]), err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_a_fifo_anywhere_is_refused_not_waited_on(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    alice = repo.key("alice")
    plan = repo.root / "plan.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(plan)).code == 0
    started = time.monotonic()
    fifo(repo.root / "plan.json.sig")
    one_line_error(repo.gov("apply", "--env", "prod", str(plan), timeout=20),
                   "plan.json.sig", "FIFO")
    one_line_error(repo.gov("approve", "--yes", str(plan), "--key", str(alice), timeout=20), "FIFO")
    (repo.root / "plan.json.sig").unlink()
    one_line_error(repo.gov("approve", "--yes", str(plan), "--key", str(fifo(repo.root / "key")),
                            timeout=20), "FIFO")
    signers = repo.root / "allowed_signers"
    kept = signers.read_text()
    fifo(signers)
    one_line_error(repo.gov("plan", "--env", "prod", timeout=20), "allowed_signers", "FIFO")
    signers.unlink()
    signers.write_text(kept)
    one_line_error(repo.gov("show", str(fifo(repo.root / "p2.json")), timeout=20), "FIFO")
    one_line_error(repo.gov("apply", "--reviewed", str(repo.root / "p2.json"), "--env",
                            "prod", timeout=20), "FIFO")
    assert time.monotonic() - started < 60
    assert repo.hooks() == {}


BOMB = '["aaaaaaaaaa"]' + ".map(x, x + x)" * 27 + ".size() > 0"


def test_a_rule_over_its_budget_is_one_line_naming_it(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    project = repo.root / "govsync.yaml"
    project.write_text(project.read_text().replace(
        "rules:\n", f"rules:\n  - name: bomb\n    expression: '{BOMB}'\n", 1))
    started = time.monotonic()
    done = repo.gov("validate", timeout=60)
    assert time.monotonic() - started < 30
    assert done.code == 1 and "Traceback" not in done.err, done
    assert "rule bomb" in done.err and "budget" in done.err, done
    assert "MemoryError" not in done.err


def test_a_rule_message_is_one_line(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    project = repo.root / "govsync.yaml"
    project.write_text(project.read_text().replace(
        'message: "hooks in prod must time out within 5 s"',
        'message: "ok\\nPlan: 0 to create, 0 to update"'))
    done = repo.gov("validate")
    assert done.code == 1 and "message must be one line" in done.err, done


# -- 9: the smaller holes --------------------------------------------------------------


def test_a_passphrase_protected_key_approves(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    locked = repo.key("alice", passphrase="correct horse")
    plan = repo.root / "plan.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(plan)).code == 0
    wrong = repo.gov("approve", "--yes", str(plan), "--key", str(locked),
                     env=repo.environ(GOVSYNC_KEY_PASSPHRASE="wrong"))
    one_line_error(wrong, "wrong passphrase")
    right = repo.gov("approve", "--yes", str(plan), "--key", str(locked),
                     env=repo.environ(GOVSYNC_KEY_PASSPHRASE="correct horse"))
    assert right.code == 0, right
    assert "Approved" in right.out and "alice@example.com" in right.out
    again = repo.gov("approve", "--yes", str(plan), "--key", str(locked),
                     env=repo.environ(GOVSYNC_KEY_PASSPHRASE="correct horse"))
    assert "earlier signature" in again.out and "replaced" in again.out, again


def test_one_person_counts_once_whatever_their_principals(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    both = repo.key("alice", principals="alice@example.com,alice@example.org")
    other = repo.key("alice2", principals="Alice@Example.com")
    repo.key("bob")
    plan = repo.root / "plan.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(plan)).code == 0
    for key in (both, other):
        assert repo.gov("approve", "--yes", str(plan), "--key", str(key)).code == 0
    refused = repo.gov("apply", "--env", "prod", str(plan))
    assert refused.code == 1 and "has 1 valid" in refused.err, refused
    assert "a repeated signature by Alice@Example.com" in refused.err
    assert repo.hooks() == {}


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_a_dsa_key_is_refused_in_govsyncs_words(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    plan = repo.root / "plan.json"
    assert repo.gov("plan", "--env", "prod", "--out", str(plan)).code == 0
    try:
        dsa = repo.key("dsa", kind="dsa", allowed=False)
    except subprocess.CalledProcessError:
        pytest.skip("this ssh-keygen cannot make DSA keys")
    done = repo.gov("approve", "--yes", str(plan), "--key", str(dsa))
    one_line_error(done, "DSA")
    assert "Warning" not in done.err and ".py" not in done.err


def test_govsyncs_own_key_is_never_a_secret_of_an_object(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    (repo.root / "manifests" / "siem.yaml").write_text(
        "apiVersion: govsync/v1\nkind: LogIntegration\nmetadata: {name: siem}\nspec:\n"
        "  logStoreB:\n    apiKey: {fromEnv: GOVSYNC_API_KEY}\n")
    done = repo.gov("plan", "--env", "staging")
    assert done.code == 1 and "GOVSYNC_API_KEY is one of govsync's own settings" in done.err
    assert repo.count() == 0 or "LogIntegration" not in repo.objects()


def test_credentials_in_the_endpoint_url_are_never_stored_or_printed(
        sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    port = repo.url.rsplit(":", 1)[1]
    done = repo.gov("apply", "--env", "staging", "--auto-approve", "--endpoint",
                    f"http://ops:pw-s3cret@127.0.0.1:{port}")
    assert done.code == 0, done
    repo.set_timeout(2000)
    elsewhere = repo.gov("plan", "--env", "staging", "--endpoint",
                         f"http://127.0.0.2:{port}/?token=tok-s3cret")
    assert elsewhere.code == 0, elsewhere
    assert f"not http://127.0.0.2:{port}" in elsewhere.out  # the warning, no token
    same = repo.gov("plan", "--env", "staging", "--endpoint",
                    f"http://127.0.0.1:{port}/?token=tok-s3cret")
    assert "was applied against" not in same.out  # the same endpoint: no warning
    with sqlite3.connect(repo.state) as db:
        text = repr(db.execute("SELECT * FROM workspaces").fetchall())
        text += repr(db.execute("SELECT * FROM history").fetchall())
    assert f"http://127.0.0.1:{port}" in text
    for secret in ("pw-s3cret", "tok-s3cret"):
        assert secret not in done.out + done.err + elsewhere.out + elsewhere.err + same.out
        assert secret not in text


def test_secrets_and_the_key_echoed_inside_answers_are_not_kept() -> None:
    answer = {"id": "x", "message": f"key {KEY} accepted for secret-123", f"{KEY}": 1,
              "list": ["secret-123!"]}
    kept = json.dumps(scrub(answer, sorted({KEY, "secret-123"}, key=len, reverse=True)))
    assert KEY not in kept and "secret-123" not in kept


def test_leftover_backup_copies_of_a_killed_process_are_removed(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    state = Path(repo.state)
    leftover = Path(f"{state}.backup.tmp-99999999-dead")
    leftover.write_bytes(state.read_bytes())
    repo.set_timeout(2000)
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    assert not leftover.exists()
    assert all(oct(p.stat().st_mode & 0o777) == oct(0o600)
               for p in state.parent.iterdir() if p.name.startswith("state.db"))
