"""Signed two-person approvals of saved plans.

```yaml
approvals:
  required: 2                                 # distinct signers
  allowedSigners: .govsync/allowed_signers    # git's format (ssh-keygen(1) ALLOWED SIGNERS)
  environments: [prod]                        # optional: every environment
```

``govsync approve PLAN --key FILE`` signs the saved plan file's bytes with an
SSH key (namespace ``govsync-plan``) and appends the signature to
``PLAN.sig``.  That file is a list of armored ``SSH SIGNATURE`` blocks, each
optionally preceded by ``#`` comment lines saying whose it is; a file that
``ssh-keygen -Y sign -n govsync-plan PLAN`` writes is one such entry, and
each entry can be checked with ``ssh-keygen -Y verify``.

Whose a signature is comes from the allowed-signers file, as
``ssh-keygen -Y find-principals`` finds it: the principals of the line that
lists its key.  ``govsync apply PLAN`` counts the valid signatures of
distinct keys and distinct principals, and refuses, before anything is sent,
a plan with fewer than ``required``, saying whose were valid and why the
others did not count.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from govsync.errors import ApprovalError
from govsync.sshsig import SshsigError

if TYPE_CHECKING:
    from govsync.planfile import SavedPlan
    from govsync.settings import Settings

NAMESPACE = "govsync-plan"
APPROVAL_KEYS = ("required", "allowedSigners", "environments")
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
    from govsync.files import display_path
    from govsync.manifests.wording import unknown, unknown_keys

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

    def allows(self, namespace: str) -> bool:
        from fnmatch import fnmatchcase

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
    import base64
    import binascii

    from govsync import sshsig

    path = approvals.allowed_signers
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError as exc:
        raise ApprovalError(
            f"{approvals.place}: the allowed-signers file {path} does not exist: create it with "
            "one line per signer, `PRINCIPAL KEYTYPE BASE64KEY` (the first fields of the "
            "signer's .pub file), and commit it") from exc
    except OSError as exc:
        raise ApprovalError(f"{approvals.place}: cannot read the allowed-signers file {path}: "
                            f"{exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise ApprovalError(f"{path} is larger than 4 MiB: not an allowed-signers file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApprovalError(f"{path}: not UTF-8 text: not an allowed-signers file") from exc
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
        unknown = sorted(set(options) - {"namespaces", "valid-after", "valid-before"})
        if unknown:
            raise ApprovalError(f"{where}: unknown option {unknown[0]!r}: use namespaces=, "
                                "valid-after= or valid-before=")
        if kind not in sshsig.KEY_TYPES:
            raise ApprovalError(f"{where}: key type {kind} is not supported: use ssh-ed25519, "
                                "ecdsa-sha2-nistp256/384/521 or ssh-rsa")
        try:
            blob = base64.b64decode(b64, validate=True)
            if sshsig.key_type(blob) != kind:
                raise SshsigError(f"the key is not a {kind} key")
            sshsig.public_key(blob)
        except (binascii.Error, ValueError) as exc:
            raise ApprovalError(f"{where}: the {kind} key is malformed ({exc}): copy it "
                                "again from the signer's .pub file") from exc
        namespaces = options.get("namespaces")
        signers.append(AllowedSigner(
            principals, blob,
            tuple(n.strip() for n in namespaces.split(",")) if namespaces is not None else None,
            _timestamp(str(options["valid-after"]), where, "valid-after")
            if options.get("valid-after") else None,
            _timestamp(str(options["valid-before"]), where, "valid-before")
            if options.get("valid-before") else None,
            where))
    return signers


# -- the signature file ---------------------------------------------------------------


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
    from govsync import sshsig

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ApprovalError(f"cannot read the signatures {path}: {exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise ApprovalError(f"{path} is larger than 4 MiB: not a govsync signature file")
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
    from govsync import sshsig

    moment = time.time() if now is None else now
    result = Verification()
    keys: set[bytes] = set()
    principals: set[str] = set()
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
                                      "this plan was edited after it was signed)")
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
        if signature.key in keys or who in principals:
            result.not_counted.append(f"{place}: a repeated signature by {who} (one counts)")
            continue
        keys.add(signature.key)
        principals.add(who)
        result.approvers.append(Approver(who, fp, signature.key_type))
    return result


def _when(moment: float | None) -> str:
    if moment is None:
        return "?"
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


def needed(approvals: Approvals | None, environment: str | None,
           workspace: str, environments: dict[str, str]) -> str | None:
    """Why approvals are required here (None: they are not).

    ``environments`` maps each environment's name to its workspace: without
    --env, a workspace that belongs to an environment requiring approvals
    requires them too (so leaving out --env does not skip them)."""
    if approvals is None:
        return None
    if approvals.environments is None:
        return f"environment {environment}" if environment else "this project"
    if environment is not None:
        return f"environment {environment}" if environment in approvals.environments else None
    for name in approvals.environments:
        if environments.get(name) == workspace:
            return f"workspace {workspace} (environment {name})"
    return None


def check(plan_path: str, raw: bytes, approvals: Approvals, scope: str) -> list[Approver]:
    """The approvers of a saved plan; ApprovalError unless ``required`` distinct ones signed."""
    signers = read_allowed_signers(approvals)
    sig_path = signature_path(plan_path)
    entries = read_signatures(sig_path)
    result = verify(raw, entries, signers, sig_path)
    if len(result.approvers) >= approvals.required:
        return result.approvers
    found = len(result.approvers)
    whose = (": " + ", ".join(a.principal for a in result.approvers)) if found else ""
    missing = approvals.required - found
    detail = ("; not counted: " + "; ".join(result.not_counted)) if result.not_counted else ""
    if not entries:
        detail = f"; there is no {sig_path}"
    raise ApprovalError(
        f"{plan_path} needs {approvals.required} approvals by distinct allowed signers for "
        f"{scope} and has {found} valid{whose}{detail}: nothing was sent; {missing} more "
        f"signer(s) from {approvals.allowed_signers} must run `govsync approve {plan_path} "
        "--key KEY`")


def approve(plan_path: str, key_path: str, *, passphrase: bytes | None = None,
            approvals: Approvals | None = None) -> tuple[str, str]:
    """Sign the saved plan's bytes and add the signature to ``PLAN.sig``.

    Returns (who, the signature file).  The plan must be a govsync plan; an
    earlier signature by the same key is replaced."""
    from govsync import planfile, sshsig
    from govsync.state.base import now

    saved = planfile.read(plan_path)  # a govsync plan, readable
    raw = saved.raw
    try:
        with open(key_path, "rb") as fh:
            key_data = fh.read(1024 * 1024)
    except OSError as exc:
        raise ApprovalError(f"cannot read the key {key_path}: {exc.strerror}") from exc
    try:
        private = sshsig.load_private_key(key_data, passphrase)
    except sshsig.PassphraseNeeded:
        raise
    except SshsigError as exc:
        raise ApprovalError(f"{key_path}: {exc}: give the private key file that "
                            "`ssh-keygen -t ed25519` wrote (not the .pub)") from exc
    blob = sshsig.public_blob(private)
    fp = sshsig.fingerprint(blob)
    who = fp
    if approvals is not None:
        signers = read_allowed_signers(approvals)
        listed = [s for s in signers if s.key == blob]
        if not listed:
            raise ApprovalError(
                f"{key_path}: key {fp} is not in {approvals.allowed_signers}: add a line "
                "`PRINCIPAL KEYTYPE BASE64KEY` for it there first (a signature by it would not "
                "count)")
        who = listed[0].principals
    armored = sshsig.sign(private, raw, NAMESPACE)
    sig_path = signature_path(plan_path)
    kept = [e for e in read_signatures(sig_path)
            if sshsig.parse(sshsig.dearmor(e.armored)).key != blob]
    digest = saved.file_digest
    parts = [f"# govsync approvals of {os.path.basename(plan_path)} (sha256 {digest})\n"]
    for e in kept:
        parts += [c + "\n" for c in e.comments.splitlines()
                  if not c.startswith("# govsync approvals of ")]
        parts.append(e.armored)
    parts.append(f"# approved by {who} ({fp}) at {now()}\n{armored}")
    tmp = f"{sig_path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write("".join(parts))
        os.replace(tmp, sig_path)
    except OSError as exc:
        raise ApprovalError(f"cannot write {sig_path}: {exc.strerror}") from exc
    return who, sig_path


def gate(saved: SavedPlan | None, settings: Settings) -> list[Approver]:
    """Before an apply: the approvers its environment requires (ApprovalError if too few).

    Where approvals are required, only a saved plan can be applied."""
    selection = settings.selection
    project = selection.project
    if project is None or project.approvals is None:
        return []
    workspaces = {n: e.workspace or n for n, e in project.environments.items()}
    scope = needed(project.approvals, selection.name, settings.workspace, workspaces)
    if scope is None:
        return []
    n = project.approvals.required
    if saved is None:
        env = f" --env {selection.name}" if selection.name else ""
        raise ApprovalError(
            f"{scope} requires {n} signed approval(s) ({project.approvals.place}): apply a "
            f"saved, approved plan: `govsync plan{env} --out plan.json`, then `govsync approve "
            f"plan.json --key KEY` by {n} allowed signer(s), then `govsync apply{env} "
            "plan.json`; nothing was sent")
    return check(saved.path, saved.raw, project.approvals, scope)


def describe(saved: SavedPlan, approvals: Approvals | None) -> list[str]:
    """Lines for ``govsync show``: the plan's signatures and, with the project's
    allowed signers, whose count; never raises for a missing signature file."""
    sig_path = signature_path(saved.path)
    entries = read_signatures(sig_path)
    if not entries:
        return [f"Approvals: none ({sig_path} does not exist)."]
    if approvals is None:
        return [f"Approvals: {len(entries)} signature(s) in {sig_path}, not checked: the "
                "project has no approvals (allowedSigners) to check them against."]
    try:
        signers = read_allowed_signers(approvals)
    except ApprovalError as exc:
        return [f"Approvals: {len(entries)} signature(s) in {sig_path}, not checked: {exc}"]
    result = verify(saved.raw, entries, signers, sig_path)
    lines = [f"Approvals: {len(result.approvers)} valid of {approvals.required} required "
             f"(allowed signers: {approvals.allowed_signers})."]
    lines += [f"  approved by {a.principal} ({a.key_type} {a.fingerprint})"
              for a in result.approvers]
    lines += [f"  not counted: {why}" for why in result.not_counted]
    return lines
