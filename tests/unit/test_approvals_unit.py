"""Approvals on real keys: the project's ``approvals:``, allowed-signers files (git's
format), signature files, counting people, ``approve``, ``check`` and ``describe``."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from govsync import approvals, planfile, sshsig
from govsync.approvals import AllowedSigner, Approvals, Approver
from govsync.errors import ApprovalError
from govsync.plan import Action, Change, Plan
from govsync.planfile import SavedPlan

SIGNERS = "allowed_signers"
DIGEST = "ab" * 32
MESSAGE = approvals.review_message(DIGEST)
JAN_2020 = 1577836800.0  # 2020-01-01T00:00:00Z
JAN_2030 = 1893456000.0  # 2030-01-01T00:00:00Z


def public_text(key: Any) -> str:
    """``KEYTYPE BASE64`` as in the key's .pub file."""
    blob = sshsig.public_blob(key)
    return f"{sshsig.key_type(blob)} {base64.b64encode(blob).decode()}"


@pytest.fixture(scope="module")
def alice() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def bob() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def carol() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def signers(*lines: str) -> list[AllowedSigner]:
    return approvals.parse_allowed_signers("\n".join(lines) + "\n", SIGNERS)


def entries(tmp_path: Path, *armored: str) -> list[approvals.Entry]:
    path = tmp_path / "plan.json.sig"
    path.write_text("".join(armored))
    return approvals.read_signatures(str(path))


def sign(key: Any, message: bytes = MESSAGE, namespace: str = approvals.NAMESPACE) -> str:
    return sshsig.sign(key, message, namespace)


# -- the project's approvals: ------------------------------------------------------------


def parse_approvals(value: Any, base: str = ".") -> tuple[Approvals | None, list[Any]]:
    reported: list[Any] = []

    def report(where: tuple[Any, ...], message: str, key: bool = False) -> None:
        reported.append((where, message))

    found = approvals.parse(value, "govsync.yaml", lambda at: (7, 3), report,
                            ["prod", "staging"], base)
    return found, reported


def test_the_approvals_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    found, reported = parse_approvals({"required": 2, "allowedSigners": ".govsync/signers",
                                       "environments": ["prod"]}, base="conf")
    assert reported == []
    assert found == Approvals(2, "conf/.govsync/signers", ("prod",), "govsync.yaml", 7, 3)
    assert found.place == "govsync.yaml:7:3"
    everywhere, _ = parse_approvals({"required": 1, "allowedSigners": "/etc/signers"})
    assert everywhere is not None
    assert (everywhere.allowed_signers, everywhere.environments) == ("/etc/signers", None)
    assert parse_approvals(None) == (None, [])


@pytest.mark.parametrize(("value", "where", "message"), [
    ("two", ("approvals",), "approvals is a mapping with required, allowedSigners and "
                            "environments"),
    ({"required": 0, "allowedSigners": "f"}, ("approvals", "required"),
     "approvals.required must be the number of distinct signers needed (1 or more)"),
    ({"required": True, "allowedSigners": "f"}, ("approvals", "required"), "approvals.required"),
    ({"required": 101, "allowedSigners": "f"}, ("approvals", "required"), "approvals.required"),
    ({"required": "2", "allowedSigners": "f"}, ("approvals", "required"), "approvals.required"),
    ({"allowedSigners": "f"}, ("approvals",), "approvals.required"),
    ({"required": 1}, ("approvals",), "approvals.allowedSigners must name the allowed-signers "
                                      "file (e.g. .govsync/allowed_signers)"),
    ({"required": 1, "allowedSigners": ""}, ("approvals", "allowedSigners"),
     "approvals.allowedSigners"),
    ({"required": 1, "allowedSigners": "f", "environments": []}, ("approvals", "environments"),
     "approvals.environments must be a list of environment names"),
    ({"required": 1, "allowedSigners": "f", "environments": "prod"},
     ("approvals", "environments"), "approvals.environments must be a list"),
    ({"required": 1, "allowedSigners": "f", "environments": ["prd"]},
     ("approvals", "environments", 0),
     "unknown environment 'prd' in approvals.environments: did you mean 'prod'?"),
    ({"required": 1, "allowedSigners": "f", "signers": "x"}, ("approvals", "signers"),
     "unknown field approvals.signers"),
])
def test_every_wrong_shape_is_reported(value: Any, where: tuple[Any, ...],
                                       message: str) -> None:
    found, reported = parse_approvals(value)
    assert found is None
    assert len(reported) == 1, reported
    assert reported[0][0] == where
    assert reported[0][1].startswith(message), reported[0][1]


# -- allowed-signers files --------------------------------------------------------------


def test_a_file_of_signers_comments_and_blank_lines(alice: Any, bob: Any) -> None:
    found = signers("# who may approve", "", f"alice@example.com {public_text(alice)} alice@laptop",
                    "   ", f"  bob@example.com {public_text(bob)}  ")
    assert [(s.principals, s.where) for s in found] == [
        ("alice@example.com", f"{SIGNERS}:3"), ("bob@example.com", f"{SIGNERS}:5")]
    assert found[0].key == sshsig.public_blob(alice)
    assert found[1].key == sshsig.public_blob(bob)
    # what a workspace records: the line without its comment or surrounding space
    assert found[0].line == f"alice@example.com {public_text(alice)}"
    assert found[1].line == f"bob@example.com {public_text(bob)}"
    assert (found[0].namespaces, found[0].valid_after, found[0].valid_before) == (None,) * 3
    assert found[0].allows("govsync-plan") and found[0].allows("git")


def test_quoted_principals_are_people_without_case(alice: Any) -> None:
    (signer,) = signers(f'"alice@example.com,Alice@Example.ORG, a l" {public_text(alice)}')
    assert signer.principals == "alice@example.com,Alice@Example.ORG, a l"
    assert signer.people == frozenset({"alice@example.com", "alice@example.org", "a l"})


def test_options(alice: Any) -> None:
    (signer,) = signers(f'alice@example.com namespaces="git,govsync-*",valid-after="20200101Z",'
                        f'VALID-BEFORE="20300101000000Z" {public_text(alice)}')
    assert signer.namespaces == ("git", "govsync-*")
    assert signer.allows("govsync-plan") and signer.allows("git")
    assert not signer.allows("file")
    assert (signer.valid_after, signer.valid_before) == (JAN_2020, JAN_2030)
    assert signer.line.startswith('alice@example.com namespaces="git,govsync-*",valid-after=')


@pytest.fixture
def india(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time 5 h 30 min ahead of UTC (a POSIX TZ: no tz database needed)."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("text", "seconds"), [
    ("20200101", 0), ("202001011230", 12 * 3600 + 30 * 60),
    ("20200101123045", 12 * 3600 + 30 * 60 + 45),
])
def test_times_are_local_without_z(alice: Any, india: None, text: str, seconds: int) -> None:
    (local,) = signers(f'a@x valid-before="{text}" {public_text(alice)}')
    assert local.valid_before == JAN_2020 + seconds - 5.5 * 3600
    (utc,) = signers(f'a@x valid-before="{text}Z" {public_text(alice)}')
    assert utc.valid_before == JAN_2020 + seconds


# (line, the error after "FILE:LINE: "); {key} is a valid "KEYTYPE BASE64", {b64} its base64.
BAD_LINES = [
    ("ca@example.com cert-authority {key}", "cert-authority (SSH certificates) is not "
     "supported by govsync: list each signer's own public key instead"),
    ('a@x cert-authority,namespaces="git" {key}', "cert-authority"),
    ("a@x permit-pty {key}", "unknown option 'permit-pty': use namespaces=, valid-after= "
     "or valid-before="),
    ('a@x namespaces="git",command="rm" {key}', "unknown option 'command'"),
    ("a@x ssh-ed25519 not-base64!", "the ssh-ed25519 key is malformed ("),
    ("a@x ssh-ed25519 {b64_cut}", "the ssh-ed25519 key is malformed"),
    ("a@x ssh-ed25519 AAAA", "the ssh-ed25519 key is malformed"),
    ("a@x ssh-rsa {b64}", "the ssh-rsa key is malformed (the key is not a ssh-rsa key): "
     "copy it again from the signer's .pub file"),
    ("a@x ssh-dss {b64}", "key type ssh-dss is not supported: use ssh-ed25519, "
     "ecdsa-sha2-nistp256/384/521 or ssh-rsa"),
    ("a@x sk-ssh-ed25519@openssh.com {b64}", "key type sk-ssh-ed25519@openssh.com is not "
     "supported"),
    ("a@x ssh-ed25519", "too few fields: write `PRINCIPALS [OPTIONS] KEYTYPE BASE64KEY` as in "
     "ssh-keygen(1) ALLOWED SIGNERS"),
    ('a@x namespaces="git" ssh-ed25519', "the key is missing"),
    ('"a@x {key}', "a quote is not closed"),
    ('a@x valid-before="2020" {key}', "valid-before='2020' is not a time "
     "(YYYYMMDD[HHMM[SS]][Z]): fix the allowed-signers line"),
    ('a@x valid-after="20201301" {key}', "valid-after='20201301' is not a valid date"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_a_bad_line_is_one_error_naming_it(alice: Any, line: str, message: str) -> None:
    key = public_text(alice)
    b64 = key.split()[1]
    with pytest.raises(ApprovalError) as info:
        signers("# first", f"ok@x {key}", line.format(key=key, b64=b64, b64_cut=b64[:-4]))
    text = str(info.value)
    assert text.startswith(f"{SIGNERS}:3: {message}"), text
    assert "\n" not in text


@pytest.mark.parametrize("option", ["valid-before", "valid-before=", "namespaces"])
def test_an_option_without_a_value_is_refused(alice: Any, option: str) -> None:
    with pytest.raises(ApprovalError, match=f"^{SIGNERS}:1: "):
        signers(f"a@x {option} {public_text(alice)}")


def approvals_at(path: Path) -> Approvals:
    return Approvals(2, str(path), None, "govsync.yaml", 12, 19)


def test_reading_the_allowed_signers_file(tmp_path: Path, alice: Any) -> None:
    path = tmp_path / "signers"
    path.write_text(f"alice@example.com {public_text(alice)}\n")
    (signer,) = approvals.read_allowed_signers(approvals_at(path))
    assert signer.where == f"{path}:1" and signer.key == sshsig.public_blob(alice)


def test_a_missing_allowed_signers_file_names_the_place(tmp_path: Path) -> None:
    path = tmp_path / "nowhere"
    with pytest.raises(ApprovalError) as info:
        approvals.read_allowed_signers(approvals_at(path))
    assert str(info.value) == (
        f"govsync.yaml:12:19: the allowed-signers file {path} does not exist: create it with "
        "one line per signer, `PRINCIPAL KEYTYPE BASE64KEY` (the first fields of the signer's "
        ".pub file), and commit it")


def test_a_fifo_as_allowed_signers_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    with pytest.raises(ApprovalError) as info:
        approvals.read_allowed_signers(approvals_at(path))
    assert str(info.value) == (f"govsync.yaml:12:19: the allowed-signers file {path}: it is a "
                               "FIFO (named pipe), not a regular file: refusing to read it")


def test_allowed_signers_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "signers"
    path.write_bytes(b"alice\xff ssh-ed25519 AAAA\n")
    with pytest.raises(ApprovalError, match=f"^{path}: not UTF-8 text: not an allowed-signers"):
        approvals.read_allowed_signers(approvals_at(path))


# -- signature files ----------------------------------------------------------------------


def test_signature_files_keep_comments_and_lines(tmp_path: Path, alice: Any, bob: Any) -> None:
    one, two = sign(alice), sign(bob)
    found = entries(tmp_path, "# header\n", "# alice, today\n", one, "\n\n", "  # bob\n", two,
                    "# a trailing comment\n")
    assert [(e.line, e.comments) for e in found] == [
        (3, "# header\n# alice, today\n"), (7 + one.count("\n") - 1, "# bob\n")]
    assert [e.armored for e in found] == [one, two]


def test_no_signature_file_is_no_signature(tmp_path: Path) -> None:
    assert approvals.read_signatures(str(tmp_path / "plan.json.sig")) == []
    assert entries(tmp_path, "# nothing yet\n\n") == []


def test_a_truncated_signature_is_refused(tmp_path: Path, alice: Any) -> None:
    good = sign(alice)
    path = tmp_path / "plan.json.sig"
    with pytest.raises(ApprovalError) as info:
        entries(tmp_path, "# mine\n", good[:good.rindex("-----END")])
    assert str(info.value) == (
        f"{path}:2: the signature starting here has no -----END SSH SIGNATURE----- line (the "
        "file is truncated): remove it and ask its signer to run `govsync approve` again")
    cut = good.splitlines()
    with pytest.raises(ApprovalError, match=rf"^{path}:{len(cut) - 1}: a signature starting on "
                                            r"line 1 ends without -----END SSH SIGNATURE----- "
                                            r"\(truncated\)"):
        entries(tmp_path, "\n".join(cut[:-2]) + "\n", good)


def test_a_junk_line_is_refused(tmp_path: Path, alice: Any) -> None:
    path = tmp_path / "plan.json.sig"
    with pytest.raises(ApprovalError) as info:
        entries(tmp_path, sign(alice), "LGTM, ship it\n")
    lines = sign(alice).count("\n")
    assert str(info.value) == (
        f"{path}:{lines + 1}: expected -----BEGIN SSH SIGNATURE----- or a # comment, found "
        "'LGTM, ship it': remove it and ask its signer to run `govsync approve` again")


def test_a_malformed_block_is_refused(tmp_path: Path, alice: Any) -> None:
    lines = sign(alice).splitlines()
    lines[2] = lines[2][:-1] + "*"
    with pytest.raises(ApprovalError, match=r":1: the signature is malformed \(its base64 is "
                                            r"malformed\): remove it"):
        entries(tmp_path, "\n".join(lines) + "\n")
    not_sshsig = sshsig.armor(b"SSHSIG\x00\x00\x00\x02")
    with pytest.raises(ApprovalError, match=r":1: the signature is malformed \(SSH signature "
                                            r"version 2: only version 1 exists\)"):
        entries(tmp_path, not_sshsig)


def test_a_signature_file_that_is_not_ascii(tmp_path: Path, alice: Any) -> None:
    path = tmp_path / "plan.json.sig"
    path.write_text("# approuvé par Zoë\n" + sign(alice), encoding="utf-8")
    with pytest.raises(ApprovalError) as info:
        approvals.read_signatures(str(path))
    assert str(info.value) == (f"{path}: not ASCII text: not a signature file (made by "
                               "`govsync approve` or `ssh-keygen -Y sign`)")


def test_a_fifo_as_signature_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json.sig"
    os.mkfifo(path)
    with pytest.raises(ApprovalError, match=rf"^cannot read the signatures {path}: it is a FIFO"):
        approvals.read_signatures(str(path))


# -- verifying: whose signatures count ----------------------------------------------------


def verify(tmp_path: Path, allowed: list[AllowedSigner], *armored: str,
           now: float | None = None) -> approvals.Verification:
    found = entries(tmp_path, *armored)
    return approvals.verify(MESSAGE, found, allowed, "P.sig", now=now)


def test_a_valid_signature_counts(tmp_path: Path, alice: Any) -> None:
    result = verify(tmp_path, signers(f"alice@example.com {public_text(alice)}"), sign(alice))
    fp = sshsig.fingerprint(sshsig.public_blob(alice))
    assert result.approvers == [Approver("alice@example.com", fp, "ssh-ed25519")]
    assert result.not_counted == []
    assert result.approvers[0].as_dict() == {"principal": "alice@example.com", "key": fp,
                                             "keyType": "ssh-ed25519"}


def test_distinct_people_count_in_order(tmp_path: Path, alice: Any, bob: Any) -> None:
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    result = verify(tmp_path, allowed, sign(bob), sign(alice))
    assert [(a.principal, a.key_type) for a in result.approvers] == [
        ("bob@example.com", "ecdsa-sha2-nistp256"), ("alice@example.com", "ssh-ed25519")]


def test_the_same_key_twice_counts_once(tmp_path: Path, alice: Any) -> None:
    allowed = signers(f"alice@example.com,alice@example.org {public_text(alice)}")
    result = verify(tmp_path, allowed, sign(alice), sign(alice))
    assert [a.principal for a in result.approvers] == ["alice@example.com,alice@example.org"]
    second = 1 + sign(alice).count("\n")
    assert result.not_counted == [f"P.sig:{second}: a repeated signature by "
                                  "alice@example.com,alice@example.org (one counts)"]


def test_one_key_listed_for_two_principals_is_one_person(tmp_path: Path, alice: Any) -> None:
    # the key on two lines, one principal each: still one signer
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"alice@example.org {public_text(alice)}")
    result = verify(tmp_path, allowed, sign(alice), sign(alice))
    assert len(result.approvers) == 1 and len(result.not_counted) == 1


def test_two_keys_of_one_person_count_once_without_case(tmp_path: Path, alice: Any,
                                                         carol: Any) -> None:
    allowed = signers(f"ops@example.com,alice@example.com {public_text(alice)}",
                      f"ALICE@Example.COM {public_text(carol)}")
    result = verify(tmp_path, allowed, sign(alice), sign(carol))
    assert [a.principal for a in result.approvers] == ["ops@example.com,alice@example.com"]
    assert result.not_counted == [f"P.sig:{1 + sign(alice).count(chr(10))}: a repeated "
                                  "signature by ALICE@Example.COM (one counts)"]


def test_what_does_not_count_and_why(tmp_path: Path, alice: Any, bob: Any,
                                     carol: Any) -> None:
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    parts = [sign(carol), sign(alice, namespace="git"),
             sign(bob, approvals.review_message("cd" * 32))]
    result = verify(tmp_path, allowed, *parts)
    starts = [1, 1 + parts[0].count("\n"), 1 + parts[0].count("\n") + parts[1].count("\n")]
    carol_fp = sshsig.fingerprint(sshsig.public_blob(carol))
    assert result.approvers == []
    assert result.not_counted == [
        f"P.sig:{starts[0]}: key {carol_fp} is not in the allowed signers",
        f"P.sig:{starts[1]}: alice@example.com's signature is for namespace 'git', not "
        "'govsync-plan'",
        f"P.sig:{starts[2]}: bob@example.com's signature is over another plan (or a plan whose "
        "changes differ from this one's)",
    ]


def test_a_key_restricted_to_other_namespaces(tmp_path: Path, alice: Any) -> None:
    allowed = signers(f'alice@example.com namespaces="git,file" {public_text(alice)}')
    result = verify(tmp_path, allowed, sign(alice))
    assert result.approvers == []
    assert result.not_counted == ["P.sig:1: alice@example.com's may not sign govsync-plan "
                                  f"(namespaces= in {SIGNERS}:1)"]


def test_an_expired_key_with_an_explicit_now(tmp_path: Path, alice: Any) -> None:
    allowed = signers(f'alice@example.com valid-before="20200101Z" {public_text(alice)}')
    assert len(verify(tmp_path, allowed, sign(alice), now=JAN_2020 - 1).approvers) == 1
    late = verify(tmp_path, allowed, sign(alice), now=JAN_2020)
    assert late.approvers == []
    assert late.not_counted == ["P.sig:1: alice@example.com's key expired (2020-01-01 00:00 UTC, "
                                f"{SIGNERS}:1)"]


def test_a_key_not_valid_yet_with_an_explicit_now(tmp_path: Path, alice: Any) -> None:
    allowed = signers(f'alice@example.com valid-after="20300101Z" {public_text(alice)}')
    early = verify(tmp_path, allowed, sign(alice), now=JAN_2030 - 1)
    assert early.approvers == []
    assert early.not_counted == ["P.sig:1: alice@example.com's key is not valid before "
                                 f"2030-01-01 00:00 UTC ({SIGNERS}:1)"]
    assert len(verify(tmp_path, allowed, sign(alice), now=JAN_2030).approvers) == 1


def test_a_key_on_two_lines_counts_by_the_line_that_allows_it(tmp_path: Path,
                                                              alice: Any) -> None:
    allowed = signers(f'old@example.com valid-before="20200101Z" {public_text(alice)}',
                      f"new@example.com {public_text(alice)}")
    result = verify(tmp_path, allowed, sign(alice), now=JAN_2030)
    assert [a.principal for a in result.approvers] == ["new@example.com"]


# -- check ------------------------------------------------------------------------------


def test_check_returns_the_approvers(tmp_path: Path, alice: Any, bob: Any) -> None:
    plan = tmp_path / "plan.json"
    (tmp_path / "plan.json.sig").write_text(sign(alice) + sign(bob))
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    found = approvals.check(str(plan), MESSAGE, allowed, 2, "environment prod", "S")
    assert [a.principal for a in found] == ["alice@example.com", "bob@example.com"]


def test_check_says_how_many_whose_and_why_not_others(tmp_path: Path, alice: Any,
                                                      bob: Any) -> None:
    plan = tmp_path / "plan.json"
    mine, theirs = sign(alice), sign(bob, approvals.review_message("cd" * 32))
    (tmp_path / "plan.json.sig").write_text(mine + theirs)
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    with pytest.raises(ApprovalError) as info:
        approvals.check(str(plan), MESSAGE, allowed, 3, "environment prod",
                        ".govsync/allowed_signers")
    assert str(info.value) == (
        f"{plan} needs 3 approvals by distinct allowed signers for environment prod and has 1 "
        f"valid: alice@example.com; not counted: {plan}.sig:{1 + mine.count(chr(10))}: "
        "bob@example.com's signature is over another plan (or a plan whose changes differ from "
        "this one's): nothing was sent; 2 more signer(s) from .govsync/allowed_signers must run "
        f"`govsync approve {plan} --key KEY`")


def test_check_without_a_signature_file(tmp_path: Path, alice: Any) -> None:
    plan = tmp_path / "plan.json"
    with pytest.raises(ApprovalError) as info:
        approvals.check(str(plan), MESSAGE, signers(f"a@x {public_text(alice)}"), 1,
                        "workspace prod", "S")
    assert str(info.value) == (
        f"{plan} needs 1 approvals by distinct allowed signers for workspace prod and has 0 "
        f"valid; there is no {plan}.sig: nothing was sent; 1 more signer(s) from S must run "
        f"`govsync approve {plan} --key KEY`")


# -- approve and describe ---------------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> SavedPlan:
    plan = Plan(workspace="prod", lineage="lin", serial=3, digest="d",
                changes=[Change("Hook/h", Action.CREATE, "Hook", request={"name": "h"},
                                operation="CreateHook")],
                id="0123456789abcdef", environment="prod")
    path = tmp_path / "plan.json"
    planfile.write(plan, str(path), b"k" * 32)
    return planfile.read(str(path))


def test_approve_signs_the_review_digest(saved: SavedPlan, alice: Any, bob: Any) -> None:
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    done = approvals.approve(saved, alice, allowed, "S")
    assert done == approvals.Signed("alice@example.com", saved.path + ".sig", False)
    message = approvals.review_message(saved.review_digest)
    found = approvals.check(saved.path, message, allowed, 1, "environment prod", "S")
    assert [a.principal for a in found] == ["alice@example.com"]
    text = Path(done.path).read_text()
    fp = sshsig.fingerprint(sshsig.public_blob(alice))
    assert text.startswith(f"# govsync approvals of plan.json (review digest "
                           f"sha256:{saved.review_digest})\n# approved by alice@example.com "
                           f"({fp}) at ")
    assert sorted(os.listdir(os.path.dirname(saved.path))) == ["plan.json", "plan.json.sig"]


def test_approving_again_replaces_the_earlier_signature(saved: SavedPlan, alice: Any,
                                                        bob: Any) -> None:
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    approvals.approve(saved, alice, allowed, "S")
    assert approvals.approve(saved, bob, allowed, "S").replaced is False
    again = approvals.approve(saved, alice, allowed, "S")
    assert again.replaced is True
    found = approvals.read_signatures(again.path)
    assert len(found) == 2
    assert found[0].comments.startswith("# govsync approvals of plan.json")
    assert found[0].comments.count("# govsync approvals of") == 1
    assert "# approved by bob@example.com" in found[0].comments
    assert found[1].comments.startswith("# approved by alice@example.com")
    keys = [sshsig.parse(sshsig.dearmor(e.armored)).key for e in found]
    assert keys == [sshsig.public_blob(bob), sshsig.public_blob(alice)]


def test_approve_refuses_a_key_not_in_the_signers(saved: SavedPlan, alice: Any,
                                                  carol: Any) -> None:
    fp = sshsig.fingerprint(sshsig.public_blob(carol))
    with pytest.raises(ApprovalError) as info:
        approvals.approve(saved, carol, signers(f"a@x {public_text(alice)}"), "the signers")
    assert str(info.value) == (f"key {fp} is not in the signers: add a line `PRINCIPAL KEYTYPE "
                               "BASE64KEY` for it there first (a signature by it would not "
                               "count)")
    assert not os.path.exists(saved.path + ".sig")


def test_approve_without_signers_names_the_key(saved: SavedPlan, carol: Any) -> None:
    done = approvals.approve(saved, carol, None, "")
    assert done.who == sshsig.fingerprint(sshsig.public_blob(carol))


def test_describe(saved: SavedPlan, alice: Any, bob: Any, carol: Any) -> None:
    sig = saved.path + ".sig"
    allowed = signers(f"alice@example.com {public_text(alice)}",
                      f"bob@example.com {public_text(bob)}")
    assert approvals.describe(saved, allowed, 2, "S") == [
        f"Approvals: none ({sig} does not exist)."]
    approvals.approve(saved, alice, None, "")
    approvals.approve(saved, carol, None, "")
    assert approvals.describe(saved, None, 2, "S") == [
        f"Approvals: 2 signature(s) in {sig}, not checked: there are no allowed signers to "
        "check them against."]
    second = approvals.read_signatures(sig)[1].line
    assert approvals.describe(saved, allowed, 2, ".govsync/allowed_signers") == [
        "Approvals: 1 valid of 2 required (allowed signers: .govsync/allowed_signers).",
        f"  approved by alice@example.com (ssh-ed25519 "
        f"{sshsig.fingerprint(sshsig.public_blob(alice))})",
        f"  not counted: {sig}:{second}: key {sshsig.fingerprint(sshsig.public_blob(carol))} "
        "is not in the allowed signers",
    ]


# -- load_key -----------------------------------------------------------------------------


def test_load_key(tmp_path: Path, alice: Any) -> None:
    path = tmp_path / "id_ed25519"
    path.write_bytes(alice.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.OpenSSH,
                                         serialization.NoEncryption()))
    key = approvals.load_key(str(path), None)
    assert sshsig.public_blob(key) == sshsig.public_blob(alice)


def test_load_key_refuses_a_public_key_and_a_fifo(tmp_path: Path, alice: Any) -> None:
    pub = tmp_path / "id_ed25519.pub"
    pub.write_text(public_text(alice) + " me@host\n")
    with pytest.raises(ApprovalError) as info:
        approvals.load_key(str(pub), None)
    assert str(info.value) == (f"{pub}: not an OpenSSH private key (as ssh-keygen writes them): "
                               "give the private key file that `ssh-keygen -t ed25519` wrote "
                               "(not the .pub)")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ApprovalError, match=rf"^cannot read the key {fifo}: it is a FIFO"):
        approvals.load_key(str(fifo), None)


def test_load_key_of_an_encrypted_key_asks_for_the_passphrase(tmp_path: Path,
                                                               alice: Any) -> None:
    path = tmp_path / "id_ed25519"
    encryption = (serialization.PrivateFormat.OpenSSH.encryption_builder().kdf_rounds(1)
                  .build(b"secret"))
    path.write_bytes(alice.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.OpenSSH, encryption))
    with pytest.raises(sshsig.PassphraseNeeded):
        approvals.load_key(str(path), None)
    key = approvals.load_key(str(path), b"secret")
    assert sshsig.public_blob(key) == sshsig.public_blob(alice)
