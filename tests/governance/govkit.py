"""A repository with two environments, as an organisation governs it, and its attacker.

``Repo`` writes a project (staging and prod, prod with patches, a rule and two
signed approvals), runs govsync (in the test process, or as a real process
where a test needs one) against a real reference
server (``govsync serve``'s, in a thread, on loopback) and a real state (SQLite or
PostgreSQL), and reads what the server holds.  Tests written with it try to
walk around the governance as an attacker would, and check that the server
never holds what the attacker wanted.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

from testkit import Run, Served, environ, govsync, stored_objects

KEY = "governance-test-key"

HOOK = """\
apiVersion: govsync/v1
kind: Hook
metadata:
  name: {name}
spec:
  code: "export default function hook() {{ return 1; }}"
  timeoutMs: {{var: timeout}}
  status: active
"""

PROD_PATCH = """\
apiVersion: govsync/v1
kind: Patch
metadata: {name: prod-risk}
spec:
  target: Hook/risk
  merge: {description: production}
"""

PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
vars: {{timeout: 1500}}
environments:
  staging:
    workspace: {staging}
    state: {state}
  prod:
    paths: [manifests/, envs/prod/]
    workspace: {prod}
    state: {state}
    vars: {{timeout: 1500}}
rules:
  - name: prod-short-hooks
    match: {{kinds: [Hook], environments: [prod]}}
    expression: "object.spec.timeoutMs <= 5000"
    message: "hooks in prod must time out within 5 s"
approvals:
  required: 2
  allowedSigners: allowed_signers
  environments: [prod]
"""


class Repo:
    """A governed repository, its server and its state."""

    def __init__(self, root: Path, state: str) -> None:
        self.root = root
        self.suffix = uuid.uuid4().hex[:8]
        self.staging, self.prod = f"staging-{self.suffix}", f"prod-{self.suffix}"
        self.state = state
        (root / "manifests").mkdir(parents=True)
        (root / "envs" / "prod").mkdir(parents=True)
        (root / "keys").mkdir()
        (root / "manifests" / "hooks.yaml").write_text(HOOK.format(name="risk"))
        (root / "envs" / "prod" / "patch.yaml").write_text(PROD_PATCH)
        (root / "allowed_signers").write_text("")
        self.write_project()
        self.server = Served(["--db", str(root / "api.db"), "--api-key", KEY])
        self.url = self.server.url

    def write_project(self, text: str | None = None, path: Path | None = None) -> Path:
        target = path or self.root / "govsync.yaml"
        target.write_text(text if text is not None else PROJECT.format(
            staging=self.staging, prod=self.prod, state=json.dumps(self.state)))
        return target

    def close(self) -> None:
        self.server.stop()

    def environ(self, **extra: str) -> dict[str, str]:
        return environ({"GOVSYNC_ENDPOINT": self.url, "GOVSYNC_API_KEY": KEY, "NO_COLOR": "1",
                        "GOVSYNC_TEST_POSTGRES": os.environ.get("GOVSYNC_TEST_POSTGRES", ""),
                        **extra})

    def gov(self, *args: str, cwd: Path | None = None, timeout: float | None = None,
            env: dict[str, str] | None = None, stdin: str = "", process: bool = False) -> Run:
        """``govsync ARGS`` in the repository (or ``cwd``), by ``testkit.govsync``: in the
        test process, or as a real process where that is the point (``process``, or a
        ``timeout`` the command must not outlast, as on a FIFO)."""
        return govsync(*args, env=env or self.environ(), cwd=cwd or self.root, stdin=stdin,
                       process=process, timeout=timeout)

    def invoke(self, *args: str) -> Run:
        """``govsync ARGS`` in the test process, in the repository."""
        return self.gov(*args)

    def key(self, name: str, *, allowed: bool = True, kind: str = "ed25519",
            principals: str | None = None, passphrase: str = "") -> Path:
        path = self.root / "keys" / name
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-C", name, "-f",
                        str(path)], check=True)
        if allowed:
            kind_, b64 = path.with_suffix(".pub").read_text().split()[:2]
            with open(self.root / "allowed_signers", "a") as fh:
                fh.write(f"{principals or name + '@example.com'} {kind_} {b64}\n")
        return path

    def set_timeout(self, value: int) -> None:
        text = (self.root / "govsync.yaml").read_text()
        (self.root / "govsync.yaml").write_text(
            text.replace("vars: {timeout: 1500}", f"vars: {{timeout: {value}}}"))

    def approved_apply(self, *keys: Path, env: str = "prod") -> Run:
        """The legitimate path: plan, two approvals, apply the saved plan."""
        plan = self.root / f"plan-{uuid.uuid4().hex[:6]}.json"
        made = self.gov("plan", "--env", env, "--out", str(plan))
        assert made.code == 0, made
        for key in keys:
            signed = self.gov("approve", "--yes", str(plan), "--key", str(key))
            assert signed.code == 0, signed
        return self.gov("apply", "--env", env, str(plan))

    def objects(self) -> dict[str, list[dict[str, Any]]]:
        return stored_objects(self.url, KEY)

    def hooks(self) -> dict[str, dict[str, Any]]:
        return {h["name"]: h for h in self.objects().get("Hook", [])}

    def count(self) -> int:
        return sum(len(v) for v in self.objects().values())
