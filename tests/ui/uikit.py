"""An organisation with two environments, applied for real, for the dashboard's tests.

``build`` copies the example organisation into a project (staging and prod, prod
with two signed approvals, a warning rule), applies both environments to the
embedded reference server with canary secrets, then leaves each in a state worth
looking at:

* both: Hook/risk_score's code changed by one character (a line diff);
* staging: Satellite/discovery-analytics' type changed through a variable (blocked:
  UpdateSatelliteV2 cannot change it);
* prod: Hook/mask_pii's create left uncertain (sent, no answer).

``Dashboard`` runs ``govsync ui`` over it as a real process on loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

from govsync.cli import cli
from govsync.state import EntryStatus
from govsync.state.sqlite import SqliteStore
from testkit import (
    EXAMPLE_MANIFESTS,
    EXAMPLE_SECRET_VARS,
    EXAMPLE_SEED,
    LOOPBACK_TLS,
    free_port,
    stop,
)

# Values that must appear on no page: every secret the examples read, and the API key.
CANARIES = {name: f"canary-{i}-{name.lower()[-12:]}-5e1f0c" for i, name in
            enumerate(EXAMPLE_SECRET_VARS)}
API_KEY = "canary-api-key-9d2b7e"

PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
vars: {satelliteType: data_discovery}
environments:
  staging: {}
  prod: {}
rules:
  - name: short-hooks
    match: {kinds: [Hook]}
    expression: "object.spec.timeoutMs <= 5000"
    message: "hooks should time out within 5 s"
    severity: warning
approvals:
  required: 2
  allowedSigners: allowed_signers
  environments: [prod]
"""


def environ() -> dict[str, str | None]:
    """What the applies run with: the canaries, nothing of the developer's shell."""
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GOVSYNC_")}
    return {**base, **CANARIES, "GOVSYNC_API_KEY": API_KEY, "NO_COLOR": "1"}


def gov(root: Path, *args: str, code: int = 0) -> Result:
    with contextlib.chdir(root):
        result = CliRunner().invoke(cli, [str(a) for a in args], env=environ(),
                                    catch_exceptions=False)
    assert result.exit_code == code, (args, result.output)
    return result


def key(root: Path, name: str) -> Path:
    path = root / "keys" / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
                   check=True)
    kind, b64 = path.with_suffix(".pub").read_text().split()[:2]
    with open(root / "allowed_signers", "a") as fh:
        fh.write(f"{name}@example.com {kind} {b64}\n")
    return path


def build(root: Path) -> Path:
    """The repository (``root``), applied and then changed as the module says."""
    shutil.copytree(EXAMPLE_MANIFESTS, root / "manifests")
    satellites = root / "manifests" / "satellites.yaml"
    satellites.write_text(satellites.read_text().replace(
        "satelliteType: data_discovery", "satelliteType: {var: satelliteType}"))
    (root / "keys").mkdir()
    (root / "govsync.yaml").write_text(PROJECT)
    alice, bob = key(root, "alice"), key(root, "bob")
    local = ("--endpoint", "local", "--local-seed", str(EXAMPLE_SEED))
    gov(root, "apply", "--env", "staging", *local, "--auto-approve")
    # Both environments share the one embedded server here: prod's creates would be
    # found existing (staging made them), so prod does not read it.
    gov(root, "plan", "--env", "prod", *local, "--refresh=false", "--out", "prod.json")
    for signer in (alice, bob):
        gov(root, "approve", "--yes", "prod.json", "--key", str(signer))
    gov(root, "apply", "--env", "prod", *local, "--refresh=false", "prod.json")
    hooks = root / "manifests" / "hooks.yaml"
    hooks.write_text(hooks.read_text().replace("risk.northwind.internal/v1/score",
                                               "risk.northwind.internal/v2/score"))
    project = root / "govsync.yaml"
    project.write_text(project.read_text().replace(
        "  staging: {}", "  staging:\n    vars: {satelliteType: ai}"))
    with SqliteStore(str(root / ".govsync" / "state.db")) as store:
        entry = store.snapshot("prod").entries["Hook/mask_pii"]
        entry.status, entry.id = EntryStatus.UNCERTAIN, None
        store.put("prod", entry)
    return root


@dataclass
class Dashboard:
    """``govsync ui`` serving a repository on loopback."""

    url: str
    process: subprocess.Popen[bytes]


def start(root: Path, *, token: str | None = None, log: Path | None = None) -> Dashboard:
    """``govsync ui`` as a process in ``root``, with the canaries in its environment
    (it must read none of them), once it answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    env.update({k: v for k, v in CANARIES.items()}, GOVSYNC_API_KEY=API_KEY)
    if token:
        env["GOVSYNC_UI_TOKEN"] = token
    sink = open(log or os.devnull, "ab")  # noqa: SIM115
    process = subprocess.Popen([sys.executable, "-m", "govsync", "ui", "--listen",
                                f"127.0.0.1:{port}"], cwd=root, env=env, stdout=sink,
                               stderr=subprocess.STDOUT)
    sink.close()
    url = f"http://127.0.0.1:{port}"
    headers = {"authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"govsync ui exited with {process.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/", headers=headers, timeout=30,
                         verify=LOOPBACK_TLS).status_code == 200:
                return Dashboard(url, process)
        time.sleep(0.1)
    stop(process, kill=True)
    raise RuntimeError("govsync ui did not answer within 60 s")
