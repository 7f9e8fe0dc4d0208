"""The commit attacks of issue 30 for ``bench/soak --attacks``: someone with commit
access to the repository the merge job and the agent follow.

A git repository holds a project whose environment ``prod`` (no objects of its
own, on the soak's endpoint and state) records one required approval, applied
once with it.  Then, each as a commit:

    new-environment   an environment on prod's endpoint and state, outside
                      approvals.environments, applying the soak's manifests
                      (``apply --auto-approve``)
    rename-workspace  prod's workspace renamed and its approvals dropped, applied
                      as the merge job does (``plan --out``, ``apply --reviewed``)
    committed-state   ``.govsync/state.db`` committed (an empty state); the agent
                      run with its default state, in its checkout (``agent --once``)

Each is refused when govsync names why (the governing workspace, the state in
the checkout); whatever got through also shows as duplicates of the soak's
objects.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("new-environment", "rename-workspace", "committed-state")

PROJECT = """\
apiVersion: govsync/v1
kind: Project
environments:
  prod:
    paths: [gov/]
    workspace: {prod}
    state: {state}
{extra}approvals:
  required: 1
  allowedSigners: allowed_signers
  environments: [prod]
"""


def _run(args: list[str], env: dict[str, str], cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "govsync", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)


def _git(*args: str, cwd: str) -> None:
    subprocess.run(["git", "-c", "user.email=soak@example.com", "-c", "user.name=soak", *args],
                   cwd=cwd, capture_output=True, check=True)


class Commits:
    """The attacker's repository; ``attack(kind)`` whether govsync let it through."""

    def __init__(self, tmp: str, env: dict[str, str], manifests: str) -> None:
        self.root = os.path.join(tmp, "repo")
        self.env = {k: v for k, v in env.items() if k != "GOVSYNC_WORKSPACE"}
        self.state = env["GOVSYNC_STATE"]
        self.prod = f"{env['GOVSYNC_WORKSPACE']}-prod"
        self.round = 0
        os.makedirs(os.path.join(self.root, "gov"))
        with open(os.path.join(self.root, "gov", "none.yaml"), "w", encoding="utf-8") as fh:
            fh.write("# prod holds no objects: its first apply sends nothing, faults or not\n")
        shutil.copytree(manifests, os.path.join(self.root, "m"))
        key = os.path.join(tmp, "soak-key")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "soak", "-f", key],
                       check=True)
        with open(key + ".pub", encoding="utf-8") as fh:
            kind, b64 = fh.read().split()[:2]
        with open(os.path.join(self.root, "allowed_signers"), "w", encoding="utf-8") as fh:
            fh.write(f"soak@example.com {kind} {b64}\n")
        self._own_governance(env)
        self._write(self.prod, "")
        _git("init", "-q", "-b", "main", cwd=self.root)
        self._commit("prod, governed")
        plan = os.path.join(tmp, "prod.json")
        for step in (["plan", "--env", "prod", "--out", plan], ["approve", "--yes", plan, "--key", key],
                     ["apply", "--env", "prod", plan]):
            done = _run(step, self.env, self.root)
            if done.returncode != 0:
                raise SystemExit(f"soak: cannot govern prod: {done.stderr}")

    def _own_governance(self, env: dict[str, str]) -> None:
        """The soak's own workspace records its governance (as its first apply does)
        before prod governs the endpoint: a kill may have come before that apply
        recorded it, and a workspace new on a governed endpoint needs prod's
        approvals (what these attacks check)."""
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "src"))
        from govsync.endpoints import identity
        from govsync.governance import Governance
        from govsync.state import open_store

        with open_store(self.state) as store:
            workspace = env["GOVSYNC_WORKSPACE"]
            if store.snapshot(workspace, responses=False).governance is None:
                store.set_governance(workspace, Governance(None).stored(
                    identity(env["GOVSYNC_ENDPOINT"])))

    def _write(self, prod: str, extra: str, *, approvals: bool = True) -> None:
        text = PROJECT.format(prod=prod, state=json.dumps(self.state), extra=extra)
        if not approvals:
            text = text[:text.index("approvals:")]
        with open(os.path.join(self.root, "govsync.yaml"), "w", encoding="utf-8") as fh:
            fh.write(text)

    def _commit(self, message: str) -> None:
        _git("add", "-A", "--force", cwd=self.root)
        _git("commit", "-q", "--allow-empty", "-m", message, cwd=self.root)

    def attack(self, kind: str, tmp: str) -> bool:
        self.round += 1
        name = f"{self.prod}-{kind}-{self.round}"
        if kind == "new-environment":
            self._write(self.prod, f"  fast:\n    paths: [m/]\n    workspace: {name}\n"
                                   f"    state: {json.dumps(self.state)}\n    agent: {{autoApply: true}}\n")
            self._commit(kind)
            # Without the refresh (an endpoint without reads), so that the governance
            # binding is what stands in the way: with it, the creates of objects prod
            # holds are blocked first (no duplicate), and the binding is not reached.
            done = _run(["apply", "--env", "fast", "--auto-approve", "--refresh=false"],
                        self.env, self.root)
            return done.returncode == 0 or repr(self.prod) not in done.stderr
        if kind == "rename-workspace":
            self._write(name, "", approvals=False)
            with open(os.path.join(self.root, "govsync.yaml"), encoding="utf-8") as fh:
                text = fh.read()
            with open(os.path.join(self.root, "govsync.yaml"), "w", encoding="utf-8") as fh:
                fh.write(text.replace("paths: [gov/]", "paths: [m/]"))
            self._commit(kind)
            review = os.path.join(tmp, "review.json")
            made = _run(["plan", "--env", "prod", "--out", review, "--refresh=false"],
                        self.env, self.root)
            if made.returncode != 0:
                return False
            done = _run(["apply", "--env", "prod", "--reviewed", review, "--auto-approve",
                         "--refresh=false"], self.env, self.root)
            return done.returncode == 0 or repr(self.prod) not in done.stderr
        # committed-state: an empty state committed where the agent keeps its default.
        self._write(self.prod, f"  staging:\n    paths: [m/]\n    workspace: {name}\n"
                               "    agent: {autoApply: true}\n")
        folder = os.path.join(self.root, ".govsync")
        os.makedirs(folder, exist_ok=True)
        sqlite3.connect(os.path.join(folder, "state.db")).close()
        self._commit(kind)
        env = {k: v for k, v in self.env.items() if k != "GOVSYNC_STATE"}
        done = _run(["agent", "--once", "--repo", self.root, "--env", "staging", "--checkout",
                     os.path.join(tmp, f"checkout-{self.round}")], env, tmp)
        return "inside the agent's checkout" not in done.stdout + done.stderr
