"""Signed two-person approvals of saved plans.

```yaml
approvals:
  required: 2                                 # distinct signers
  allowedSigners: .govsync/allowed_signers    # git's format (ssh-keygen(1) ALLOWED SIGNERS)
  environments: [prod]                        # optional: every environment
```

``govsync approve PLAN --key FILE`` signs the plan's review digest (the one
line ``govsync show PLAN --digest`` prints: ``planfile.review_message``) with
an SSH key (namespace ``govsync-plan``) and appends the signature to
``PLAN.sig``.  That file is a list of armored ``SSH SIGNATURE`` blocks, each
optionally preceded by ``#`` comment lines saying whose it is; what
``govsync show PLAN --digest | ssh-keygen -Y sign -n govsync-plan -f KEY``
writes is one such entry, and each entry can be checked with
``ssh-keygen -Y verify``.  The digest covers what the plan would send, not
the file's bytes, so the approvals of a pull request's plan hold for the
same plan made again with the applying credentials (``apply --reviewed``).

Whose a signature is comes from the allowed signers, as
``ssh-keygen -Y find-principals`` finds it: the principals of the line that
lists its key.  Apply counts valid signatures by distinct keys *and*
distinct people: a key listed for ``alice@example.com,alice@example.org``
is one signer, and principals compare without case.  The signers counted
are those the workspace recorded (``governance.py``), not whatever
allowed-signers file the caller's project names.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from govsync import sshsig
from govsync.errors import ApprovalError
from govsync.files import Unreadable, display_path, read_regular
from govsync.manifests.wording import unknown, unknown_keys
from govsync.sshsig import SshsigError

if TYPE_CHECKING:
    from govsync.planfile import SavedPlan

NAMESPACE = "govsync-plan"
APPROVAL_KEYS = ("required", "allowedSigners", "environments")
# The allowed-signers options govsync reads (each with its value), as ssh-keygen does.
OPTIONS = ("namespaces", "valid-after", "valid-before")
MAX_BYTES = 4 * 1024 * 1024

Report = Callable[..., None]
Locate = Callable[[tuple[Any, ...]], tuple[int, int]]


@dataclass(frozen=True)
class Approvals:
    """The project's ``approvals:``; ``allowed_signers`` relative to the current directory."""

    required: int
    allowed_signers: str
    environments: tuple[str, ...] | None = None
    file: str = ""
    line: int = 1
    col: int = 1

    @property
    def place(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def parse(value: Any, file: str, locate: Locate, report: Report, environments: Sequence[str],
          base: str) -> Approvals | None:
    """The ``approvals:`` mapping of a project file; every problem goes to ``report``."""

    if value is None:
        return None
    at = ("approvals",)
    if not isinstance(value, dict):
        report(at, "approvals is a mapping with required, allowedSigners and environments")
        return None
    bad = unknown_keys(value, at, APPROVAL_KEYS, report)
    required = value.get("required")
    if not isinstance(required, int) or isinstance(required, bool) or not 1 <= required <= 100:
        report((*at, "required") if "required" in value else at,
               "approvals.required must be the number of distinct signers needed (1 or more)")
        bad = True
    signers = value.get("allowedSigners")
    if not isinstance(signers, str) or not signers:
        report((*at, "allowedSigners") if "allowedSigners" in value else at,
               "approvals.allowedSigners must name the allowed-signers file "
               "(e.g. .govsync/allowed_signers)")
        bad = True
    envs = value.get("environments")
    if envs is not None:
        if not isinstance(envs, list) or not envs or not all(isinstance(e, str) for e in envs):
            report((*at, "environments"), "approvals.environments must be a list of "
                                          "environment names")
            bad = True
        else:
            for i, name in enumerate(envs):
                if name not in environments:
                    listed = ", ".join(environments) or "none: the project has no environments"
                    report((*at, "environments", i), unknown(
                        f"environment {name!r} in approvals.environments", name, tuple(environments),
                        otherwise=f"known: {listed}"))
                    bad = True
    if bad:
        return None
    assert isinstance(required, int) and isinstance(signers, str)
    line, col = locate((*at, "allowedSigners"))
    path = signers if os.path.isabs(signers) else display_path(os.path.join(base, signers))
    return Approvals(required, path, tuple(envs) if envs else None, file, line, col)


# -- the allowed-signers file ---------------------------------------------------------


@dataclass(frozen=True)
class AllowedSigner:
    """One line of an allowed-signers file."""

    principals: str
    key: bytes
    namespaces: tuple[str, ...] | None
    valid_after: float | None
    valid_before: float | None
    where: str  # FILE:LINE
    line: str = ""  # the line as read, less surrounding space: what a workspace records

    @property
    def people(self) -> frozenset[str]:
        """Who the line names, each once: principals without case."""
        return frozenset(p.strip().lower() for p in self.principals.split(",") if p.strip())

    def allows(self, namespace: str) -> bool:

        return self.namespaces is None or any(fnmatchcase(namespace, p) for p in self.namespaces)


_TIME = re.compile(r"^(\d{8})(\d{4}(\d{2})?)?(Z|z)?$")


def _timestamp(text: str, where: str, option: str) -> float:
    """ssh-keygen's YYYYMMDD[HHMM[SS]][Z] (local time without Z)."""
    m = _TIME.match(text)
    if not m:
        raise ApprovalError(f"{where}: {option}={text!r} is not a time (YYYYMMDD[HHMM[SS]][Z]): "
                            "fix the allowed-signers line")
    digits = m.group(1) + (m.group(2) or "0000")
    if not m.group(3):
        digits += "00"
    try:
        moment = datetime.strptime(digits, "%Y%m%d%H%M%S")
    except ValueError as exc:
        raise ApprovalError(f"{where}: {option}={text!r} is not a valid date: fix the "
                            "allowed-signers line") from exc
    if m.group(4):
        return moment.replace(tzinfo=UTC).timestamp()
    return time.mktime(moment.timetuple())


def _tokens(line: str) -> list[str]:
    """Whitespace-separated fields, double quotes keeping spaces together."""
    out: list[str] = []
    current: list[str] = []
    quoted = started = False
    for ch in line:
        if ch == '"':
            quoted = not quoted
            current.append(ch)
            started = True
        elif ch in " \t" and not quoted:
            if started:
                out.append("".join(current))
                current, started = [], False
        else:
            current.append(ch)
            started = True
    if quoted:
        raise ValueError("a quote is not closed")
    if started:
        out.append("".join(current))
    return out


def _split_options(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def read_allowed_signers(approvals: Approvals) -> list[AllowedSigner]:
    """The allowed signers; ApprovalError (one line, with the place) when missing or malformed."""
    path = approvals.allowed_signers
    try:
        raw = read_regular(path, MAX_BYTES)
    except Unreadable as exc:
        if not os.path.lexists(path):
            raise ApprovalError(
                f"{approvals.place}: the allowed-signers file {path} does not exist: create it "
                "with one line per signer, `PRINCIPAL KEYTYPE BASE64KEY` (the first fields of "
                "the signer's .pub file), and commit it") from exc
        raise ApprovalError(f"{approvals.place}: the allowed-signers file {path}: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApprovalError(f"{path}: not UTF-8 text: not an allowed-signers file") from exc
    return parse_allowed_signers(text, path)


def parse_allowed_signers(text: str, path: str) -> list[AllowedSigner]:
    """The lines of an allowed-signers file; ApprovalError naming ``path:LINE``."""

    signers: list[AllowedSigner] = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fix = ("write `PRINCIPALS [OPTIONS] KEYTYPE BASE64KEY` as in ssh-keygen(1) "
               "ALLOWED SIGNERS")
        try:
            tokens = _tokens(stripped)
        except ValueError as exc:
            raise ApprovalError(f"{where}: {exc}: {fix}") from exc
        if len(tokens) < 3:
            raise ApprovalError(f"{where}: too few fields: {fix}")
        principals = tokens[0].strip('"')
        options: dict[str, str | None] = {}
        rest = tokens[1:]
        if not (rest[0] in sshsig.KEY_TYPES or rest[0].startswith(("ssh-", "ecdsa-", "sk-"))):
            for option in _split_options(rest[0]):
                name, sep, value = option.partition("=")
                options[name.lower()] = value.strip('"') if sep else None
            rest = rest[1:]
        if len(rest) < 2:
            raise ApprovalError(f"{where}: the key is missing: {fix}")
        kind, b64 = rest[0], rest[1]
        if "cert-authority" in options:
            raise ApprovalError(f"{where}: cert-authority (SSH certificates) is not supported by "
                                "govsync: list each signer's own public key instead")
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ApprovalError(f"{where}: unknown option {unknown[0]!r}: use namespaces=, "
                                "valid-after= or valid-before=")
        empty = sorted(name for name, value in options.items() if not value)
        if empty:  # as ssh-keygen: an option without its value restricts nothing, so refused
            raise ApprovalError(f"{where}: option {empty[0]} has no value: write "
                                f"{empty[0]}=\"...\" or leave the option out")
        if kind not in sshsig.KEY_TYPES:
            raise ApprovalError(f"{where}: key type {kind[:40]} is not supported: use "
                                "ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa")
        try:
            blob = base64.b64decode(b64, validate=True)
            if sshsig.key_type(blob) != kind:
                raise SshsigError(f"the key is not a {kind} key")
            sshsig.public_key(blob)
        except (binascii.Error, ValueError) as exc:
            raise ApprovalError(f"{where}: the {kind} key is malformed ({exc}): copy it "
                                "again from the signer's .pub file") from exc
        namespaces, after, before = (options.get(name) for name in OPTIONS)
        signers.append(AllowedSigner(
            principals, blob,
            tuple(n.strip() for n in namespaces.split(",")) if namespaces else None,
            _timestamp(after, where, "valid-after") if after else None,
            _timestamp(before, where, "valid-before") if before else None,
            where, " ".join(tokens[:len(tokens) - len(rest) + 2])))
    return signers


# -- the signature file ---------------------------------------------------------------


def review_message(digest: str) -> bytes:
    """The bytes approvers sign: a plan's review digest (``govsync show PLAN --digest``
    prints them; planfile.review_digest computes the digest)."""
    return f"govsync-plan-review sha256:{digest}\n".encode()


def signature_path(plan_path: str) -> str:
    return plan_path + ".sig"


@dataclass(frozen=True)
class Entry:
    """One armored signature of a signature file, and the line it starts on."""

    line: int
    armored: str
    comments: str = ""  # the # lines just before it (whose it is, when)


def read_signatures(path: str) -> list[Entry]:
    """The entries of ``PLAN.sig`` ([] when there is none); ApprovalError when malformed."""

    if not os.path.lexists(path):
        return []
    try:
        raw = read_regular(path, MAX_BYTES)
    except Unreadable as exc:
        raise ApprovalError(f"cannot read the signatures {path}: {exc}") from exc
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise ApprovalError(f"{path}: not ASCII text: not a signature file (made by "
                            "`govsync approve` or `ssh-keygen -Y sign`)") from exc
    entries: list[Entry] = []
    block: list[str] | None = None
    comments: list[str] = []
    start = 0
    redo = "remove it and ask its signer to run `govsync approve` again"
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if block is None:
            if not stripped:
                continue
            if stripped.startswith("#"):
                comments.append(stripped)
                continue
            if stripped != sshsig.BEGIN:
                raise ApprovalError(f"{path}:{number}: expected {sshsig.BEGIN} or a # comment, "
                                    f"found {stripped[:40]!r}: {redo}")
            block, start = [stripped], number
            continue
        block.append(stripped)
        if stripped == sshsig.END:
            armored = "\n".join(block) + "\n"
            try:
                sshsig.parse(sshsig.dearmor(armored))
            except SshsigError as exc:
                raise ApprovalError(f"{path}:{start}: the signature is malformed ({exc}): "
                                    f"{redo}") from exc
            entries.append(Entry(start, armored, "".join(c + "\n" for c in comments)))
            block, comments = None, []
        elif stripped.startswith("-----"):
            raise ApprovalError(f"{path}:{number}: a signature starting on line {start} ends "
                                f"without {sshsig.END} (truncated): {redo}")
    if block is not None:
        raise ApprovalError(f"{path}:{start}: the signature starting here has no {sshsig.END} "
                            f"line (the file is truncated): {redo}")
    return entries


# -- verifying ------------------------------------------------------------------------


@dataclass(frozen=True)
class Approver:
    principal: str
    fingerprint: str
    key_type: str

    def as_dict(self) -> dict[str, str]:
        return {"principal": self.principal, "key": self.fingerprint, "keyType": self.key_type}


@dataclass
class Verification:
    """Whose signatures count, and why each other one does not."""

    approvers: list[Approver] = field(default_factory=list)
    not_counted: list[str] = field(default_factory=list)


def verify(message: bytes, entries: list[Entry], signers: list[AllowedSigner], sig_path: str,
           *, now: float | None = None) -> Verification:
    """Check each signature over ``message``; count distinct keys and principals."""

    moment = time.time() if now is None else now
    result = Verification()
    keys: set[bytes] = set()
    people: set[str] = set()
    for entry in entries:
        place = f"{sig_path}:{entry.line}"
        signature = sshsig.parse(sshsig.dearmor(entry.armored))
        fp = signature.fingerprint
        lines = [s for s in signers if s.key == signature.key]
        if not lines:
            result.not_counted.append(f"{place}: key {fp} is not in the allowed signers")
            continue
        who = lines[0].principals
        if signature.namespace != NAMESPACE:
            result.not_counted.append(f"{place}: {who}'s signature is for namespace "
                                      f"{signature.namespace!r}, not {NAMESPACE!r}")
            continue
        try:
            good = sshsig.verify(signature, message)
        except SshsigError as exc:
            result.not_counted.append(f"{place}: {who}'s signature cannot be checked: {exc}")
            continue
        if not good:
            result.not_counted.append(f"{place}: {who}'s signature is over another plan (or "
                                      "a plan whose changes differ from this one's)")
            continue
        usable = [s for s in lines if s.allows(NAMESPACE)
                  and (s.valid_after is None or s.valid_after <= moment)
                  and (s.valid_before is None or moment < s.valid_before)]
        if not usable:
            first = lines[0]
            if not first.allows(NAMESPACE):
                why = f"may not sign {NAMESPACE} (namespaces= in {first.where})"
            elif first.valid_before is not None and moment >= first.valid_before:
                why = f"key expired ({_when(first.valid_before)}, {first.where})"
            else:
                why = f"key is not valid before {_when(first.valid_after)} ({first.where})"
            result.not_counted.append(f"{place}: {who}'s {why}")
            continue
        who = usable[0].principals
        names = frozenset().union(*(s.people for s in usable))
        if signature.key in keys or names & people:
            result.not_counted.append(f"{place}: a repeated signature by {who} (one counts)")
            continue
        keys.add(signature.key)
        people.update(names)
        result.approvers.append(Approver(who, fp, signature.key_type))
    return result


def _when(moment: float | None) -> str:
    if moment is None:
        return "?"
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


def check(plan_path: str, message: bytes, signers: list[AllowedSigner], required: int,
          scope: str, source: str) -> list[Approver]:
    """The approvers of a plan; ApprovalError unless ``required`` distinct ones signed
    ``message`` (its review digest).  ``source``: where the signers come from, for
    messages."""
    sig_path = signature_path(plan_path)
    entries = read_signatures(sig_path)
    result = verify(message, entries, signers, sig_path)
    if len(result.approvers) >= required:
        return result.approvers
    found = len(result.approvers)
    whose = (": " + ", ".join(a.principal for a in result.approvers)) if found else ""
    missing = required - found
    detail = ("; not counted: " + "; ".join(result.not_counted)) if result.not_counted else ""
    if not entries:
        detail = f"; there is no {sig_path}"
    raise ApprovalError(
        f"{plan_path} needs {required} approvals by distinct allowed signers for {scope} and "
        f"has {found} valid{whose}{detail}: nothing was sent; {missing} more signer(s) from "
        f"{source} must run `govsync approve {plan_path} --key KEY`")


def load_key(key_path: str, passphrase: bytes | None) -> Any:
    """An SSH private key from a file (never a FIFO or a device); ApprovalError, or
    ``sshsig.PassphraseNeeded`` for an encrypted key."""

    try:
        key_data = read_regular(key_path, 1024 * 1024)
    except Unreadable as exc:
        raise ApprovalError(f"cannot read the key {key_path}: {exc}") from exc
    try:
        return sshsig.load_private_key(key_data, passphrase)
    except sshsig.PassphraseNeeded:
        raise
    except SshsigError as exc:
        raise ApprovalError(f"{key_path}: {exc}: give the private key file that "
                            "`ssh-keygen -t ed25519` wrote (not the .pub)") from exc


@dataclass(frozen=True)
class Signed:
    """What ``approve`` did: as whom, where, and whether it replaced an earlier signature."""

    who: str
    path: str
    replaced: bool


def approve(saved: SavedPlan, private: Any, signers: list[AllowedSigner] | None,
            source: str) -> Signed:
    """Sign the plan's review digest and add the signature to ``PLAN.sig``; an earlier
    signature by the same key is replaced.  ``signers``: the allowed signers to check
    the key against first (None: not checked)."""

    blob = sshsig.public_blob(private)
    fp = sshsig.fingerprint(blob)
    who = fp
    if signers is not None:
        listed = [s for s in signers if s.key == blob]
        if not listed:
            raise ApprovalError(
                f"key {fp} is not in {source}: add a line `PRINCIPAL KEYTYPE BASE64KEY` for "
                "it there first (a signature by it would not count)")
        who = listed[0].principals
    digest = saved.review_digest
    armored = sshsig.sign(private, review_message(digest), NAMESPACE)
    sig_path = signature_path(saved.path)
    entries = read_signatures(sig_path)
    kept = [e for e in entries if sshsig.parse(sshsig.dearmor(e.armored)).key != blob]
    parts = [f"# govsync approvals of {os.path.basename(saved.path)} (review digest "
             f"sha256:{digest})\n"]
    for e in kept:
        parts += [c + "\n" for c in e.comments.splitlines()
                  if not c.startswith("# govsync approvals of ")]
        parts.append(e.armored)
    parts.append(f"# approved by {who} ({fp}) at {_when(time.time())}\n{armored}")
    tmp = f"{sig_path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write("".join(parts))
        os.replace(tmp, sig_path)
    except OSError as exc:
        raise ApprovalError(f"cannot write {sig_path}: {exc.strerror}") from exc
    return Signed(who, sig_path, len(kept) < len(entries))


def describe(saved: SavedPlan, signers: list[AllowedSigner] | None, required: int,
             source: str) -> list[str]:
    """Lines for ``govsync show``: the plan's signatures and, with the allowed
    signers, whose count; never raises for a missing signature file."""

    sig_path = signature_path(saved.path)
    entries = read_signatures(sig_path)
    if not entries:
        return [f"Approvals: none ({sig_path} does not exist)."]
    if signers is None:
        return [f"Approvals: {len(entries)} signature(s) in {sig_path}, not checked: there "
                "are no allowed signers to check them against."]
    result = verify(review_message(saved.review_digest), entries, signers, sig_path)
    lines = [f"Approvals: {len(result.approvers)} valid of {required} required "
             f"(allowed signers: {source})."]
    lines += [f"  approved by {a.principal} ({a.key_type} {a.fingerprint})"
              for a in result.approvers]
    lines += [f"  not counted: {why}" for why in result.not_counted]
    return lines
