"""Helpers of the apply tests: the reference server and govsync bound to a state.

``Server`` runs ``govsync serve`` on a free loopback port (in a thread, or as a
process) and reads its ``/_govsync/objects``; ``Govsync`` runs the command line
against it with testkit's one runner: in the test process (``run``, ``invoke``),
or as a process where a real process is the point (``run(..., process=True)``,
``popen`` for tests that kill it or race it).

``big_manifests`` writes a generated manifest set (about 500 objects of 22
kinds, dependency depth 4); every object carries a field that identifies it
on the server (``IDENTITY``), so a test can find the object behind an
uncertain create, count duplicates and compare state with the server.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from govsync.api.kinds import BY_KIND
from testkit import (  # noqa: F401  (re-exported for the apply tests)
    EXAMPLE_MANIFESTS,
    EXAMPLE_SECRET_VARS,
    EXAMPLE_SEED,
    EXAMPLES,
    ROOT,
    Background,
    Run,
    Served,
    environ,
    free_port,
    govsync,
    in_flight,
    stored_objects,
    until,
)
from testkit import serve as serve_process
from testkit import stop as stop_process

KEY = "apply-test-key"
# The secret variable of the generated manifests' log integrations.
BIG_SECRET_VAR = "GOVSYNC_TEST_LOGSTORE_KEY"

# The field (dotted) that identifies an object of a kind on the server; the
# same path holds it in a manifest's resolved template.
IDENTITY: dict[str, str] = {
    "ConnectorListenerLink": "id",
    "SidecarResourceLink": "id",
    "BlockedUser": "id",
    "ResourceAlias": "alias",
    "NativeUser": "label",
    "DataDiscoveryConfiguration": "path",
    "PolicySuspension": "reason",
    "PolicyReport": "logQuery",
    "SessionTermination": "sessionId",
    "ConnectorAIProvider": "config.providerB.modelId",
}

UNSETTLED = ("pending", "uncertain")


def identity_path(kind: str) -> str:
    return IDENTITY.get(kind, "name")


def dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, Mapping) else None
    return obj


def identity(kind: str, obj: Mapping[str, Any]) -> Any:
    return dig(obj, identity_path(kind))


def object_id(kind: str, obj: Mapping[str, Any]) -> str:
    """The id of a stored object, as its create operation answers it, or as ``id`` (a
    report made {reportId} reads {id, ...})."""
    return str(obj.get(BY_KIND[kind].create.id_field, obj.get("id")))


def closed_url() -> str:
    """A loopback URL nothing listens on: any request to it fails to connect."""
    return f"http://127.0.0.1:{free_port()}"


# -- the reference server ----------------------------------------------------------


class Server:
    """``govsync serve`` on a free port, with its database in a file: in a thread of the
    test process (``testkit.Served``), or with ``process`` a process of its own whose
    output goes to ``log`` (where what the server prints is searched)."""

    def __init__(self, directory: Path, name: str, flags: Iterable[str] = (),
                 seed: Path | None = EXAMPLE_SEED, process: bool = False) -> None:
        self.directory = directory
        self.name = name
        self.flags = list(flags)
        self.seed = seed
        self.db = directory / f"{name}.db"
        self.log = directory / f"{name}.log"
        self.process = process
        self.served: Served | subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, seed: bool = True) -> Server:
        """Start (or restart, on the same database); it answers once this returns."""
        assert self.served is None, "already running"
        args = ["--db", str(self.db), "--api-key", KEY, *self.flags]
        if seed and self.seed is not None:
            args += ["--seed", str(self.seed)]
        # A restart keeps its address, as a real server's does (state records it).
        if self.process:
            self.served, url = serve_process(args, key=KEY, output=self.log,
                                             port=self.port or None)
            self.port = int(url.rsplit(":", 1)[1])
        else:
            self.served = Served(args, port=self.port or None)
            self.port = self.served.port
        return self

    def stop(self) -> None:
        served, self.served = self.served, None
        if isinstance(served, Served):
            served.stop()
        elif served is not None:
            stop_process(served)

    def objects(self) -> dict[str, list[dict[str, Any]]]:
        return stored_objects(self.url, KEY)

    def wait_in_flight(self, calls: int, timeout: float = 30) -> bool:
        """Wait until the server holds ``calls`` API calls received and not answered."""
        until(lambda: in_flight(self.url, KEY) >= calls,
              f"{calls} calls in flight on {self.name}", timeout)
        return True

    def in_flight(self) -> int:
        """The API calls it has received and not answered yet."""
        return in_flight(self.url, KEY)


# -- govsync ---------------------------------------------------------------------------


@dataclass
class Govsync:
    """The command line with one state URL, workspace and endpoint."""

    cwd: Path
    state: str
    workspace: str
    endpoint: str | None
    secrets: dict[str, str] = field(default_factory=dict)
    # Every output seen, for the secret canary test.
    transcript: list[str] = field(default_factory=list)
    # Processes started with popen, killed at teardown if still running.
    background: list[Background] = field(default_factory=list)

    def env(self, extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
        return environ({"GOVSYNC_API_KEY": KEY, "GOVSYNC_STATE": self.state,
                        "GOVSYNC_WORKSPACE": self.workspace, "NO_COLOR": "1", **self.secrets,
                        "GOVSYNC_ENDPOINT": self.endpoint or None, **(extra or {})})

    def run(self, *args: str, env: Mapping[str, str | None] | None = None,
            timeout: float | None = None, process: bool = False) -> Run:
        """``govsync ARGS`` to its end (``testkit.govsync``): in the test process, or as a
        real process where that is the point (``process``, or a ``timeout``)."""
        return self._record(govsync(*args, env=self.env(env), cwd=self.cwd,
                                    timeout=timeout, process=process))

    def invoke(self, *args: str, env: Mapping[str, str | None] | None = None) -> Run:
        """In the test process, in the test's own directory (not ``cwd``): for commands
        nobody kills."""
        return self._record(govsync(*args, env=self.env(env)))

    def popen(self, *args: str, env: Mapping[str, str | None] | None = None) -> Background:
        started = Background(list(args), env=self.env(env), cwd=self.cwd, done=self._record)
        self.background.append(started)
        return started

    def _record(self, run: Run) -> Run:
        self.transcript.append(run.out)
        self.transcript.append(run.err)
        return run

    # -- state, read through the command line ------------------------------------
    def entries(self) -> dict[str, dict[str, Any]]:
        run = self.invoke("state", "list", "--format", "json")
        assert run.code == 0, run
        return {e["address"]: e for e in json.loads(run.out)["entries"]}

    def export(self) -> dict[str, Any]:
        run = self.invoke("state", "export")
        assert run.code == 0, run
        data: dict[str, Any] = json.loads(run.out)
        return data

    def serial(self) -> int:
        return int(self.export()["serial"])

    def plan_json(self, *paths: str) -> dict[str, Any]:
        run = self.invoke("plan", *paths, "--format", "json")
        assert run.code == 0, run
        data: dict[str, Any] = json.loads(run.out)
        return data


# -- manifests -------------------------------------------------------------------------


def write_docs(path: Path, docs: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False), encoding="utf-8")


def write_hooks(directory: Path, names: Iterable[str]) -> Path:
    """``directory/hooks.yaml`` with one minimal Hook per name; returns ``directory``."""
    write_docs(directory / "hooks.yaml", [
        doc("Hook", name, {"code": "def handler(e):\n    return 1\n"}) for name in names])
    return directory


def edit_spec(path: Path, kind: str, name: str, **changes: object) -> None:
    """Change spec fields of one document of a manifest file."""
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    for d in docs:
        if d and d["kind"] == kind and d["metadata"]["name"] == name:
            d["spec"].update(changes)
            break
    else:
        raise AssertionError(f"no {kind}/{name} in {path}")
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")


def doc(kind: str, name: str, spec: dict[str, Any],
        depends_on: list[str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if depends_on:
        metadata["dependsOn"] = depends_on
    return {"apiVersion": "govsync/v1", "kind": kind, "metadata": metadata, "spec": spec}


# Objects per kind of ``big_manifests(scale=1.0)``: 500 in all.
BIG_COUNTS: dict[str, int] = {
    "Space": 20, "Connector": 40, "Satellite": 20, "ConnectorAIProvider": 20,
    "SessionTermination": 30, "Hook": 25, "Policy": 50, "PolicySuspension": 40,
    "PolicyReport": 40, "Permission": 20, "DataLabel": 20, "LogQuery": 20, "Form": 10,
    "ScenarioMonitor": 15, "Sidecar": 20, "NativeUser": 30, "DataDiscoveryConfiguration": 20,
    "ResourceAlias": 20, "LogIntegration": 10, "PolicyDataLoader": 15, "SigningKey": 10,
    "BlockedUser": 5,
}
assert sum(BIG_COUNTS.values()) == 500

_RESOURCES = ("res-orders-db", "res-warehouse", "res-events-bucket", "res-bastion",
              "res-payments-db", "res-llm-gateway")
_GROUPS = ("data-platform", "payments-engineering", "security", "analysts", "ml-research")
_USERS = ("usr-alice", "usr-bob", "usr-carol", "usr-dave", "usr-mallory", "usr-etl-bot",
          "usr-workflow-bot")


def big_manifests(directory: Path, prefix: str, scale: float = 1.0,
                  blocked_users: bool = True) -> int:
    """Write a generated manifest set under ``directory``; returns its size.

    References: Space <- Connector, Satellite (spaceRef); Connector <-
    ConnectorAIProvider, SessionTermination (connectorRef); Policy <-
    PolicySuspension, PolicyReport (policyRef); NativeUser <-
    DataDiscoveryConfiguration (nativeUserRef); and every Policy dependsOn a
    Hook and a Connector, so Space -> Connector -> Policy -> PolicySuspension
    is four levels deep.  Names and identifying fields start with ``prefix``,
    so several sets can share one server.
    """
    p = prefix
    n = {kind: max(1, round(count * scale)) for kind, count in BIG_COUNTS.items()}
    if not blocked_users:
        n["BlockedUser"] = 0
    n["BlockedUser"] = min(n["BlockedUser"], len(_USERS))
    files: dict[str, list[dict[str, Any]]] = {}

    def add(file: str, *docs: dict[str, Any]) -> None:
        files.setdefault(file, []).extend(docs)

    spaces = [f"{p}-space-{i}" for i in range(n["Space"])]
    add("spaces.yaml", *(doc("Space", s, {"description": f"space {i}"})
                         for i, s in enumerate(spaces)))
    connectors = [f"{p}-conn-{i}" for i in range(n["Connector"])]
    add("connectors.yaml", *(doc("Connector", c, {"spaceRef": spaces[i % len(spaces)],
                                                  "terminationProtection": i % 2 == 0})
                             for i, c in enumerate(connectors)))
    add("satellites.yaml", *(
        doc("Satellite", f"{p}-sat-{i}", {"spaceRef": spaces[i % len(spaces)],
                                          "satelliteType": "data_discovery"})
        for i in range(n["Satellite"])))
    add("connector-ai.yaml", *(
        doc("ConnectorAIProvider", f"{p}-ai-{i}", {
            "connectorRef": connectors[i % len(connectors)],
            "config": {"providerB": {"region": "eu-west-1", "modelId": f"{p}-model-{i}",
                                     "maxTokens": 1024}}})
        for i in range(min(n["ConnectorAIProvider"], len(connectors)))))
    add("sessions.yaml", *(
        doc("SessionTermination", f"{p}-term-{i}", {
            "connectorRef": connectors[i % len(connectors)], "sessionId": f"sess-{p}-{i}"})
        for i in range(n["SessionTermination"])))
    hooks = [f"{p.replace('-', '_')}_hook_{i}" for i in range(n["Hook"])]
    add("hooks.yaml", *(
        doc("Hook", h, {"description": f"hook {i}", "status": "active", "timeoutMs": 1000,
                        "code": f"def handler(event):\n    return {{'n': {i}}}\n",
                        "allowlistedEnvironmentVariables": [], "allowlistedNetworkHosts": []})
        for i, h in enumerate(hooks)))
    policies = [f"{p}-policy-{i}" for i in range(n["Policy"])]
    add("policies.yaml", *(
        doc("Policy", pol, {
            "description": f"policy {i}", "groupName": _GROUPS[i % len(_GROUPS)],
            "notification": "owners", "status": "dry-run",
            "code": f"package p{i}\n\nimport rego.v1\n\nallow if {{ input.n == {i} }}\n"},
            depends_on=[f"Hook/{hooks[i % len(hooks)]}",
                        f"Connector/{connectors[i % len(connectors)]}"])
        for i, pol in enumerate(policies)))
    add("policy-ops.yaml", *(
        doc("PolicySuspension", f"{p}-susp-{i}", {
            "policyRef": policies[i % len(policies)], "identityId": _USERS[i % len(_USERS)],
            "expirationMinutes": 60 + i, "oneoff": True, "reason": f"{p} suspension {i}"})
        for i in range(n["PolicySuspension"])))
    add("policy-ops.yaml", *(
        doc("PolicyReport", f"{p}-report-{i}", {
            "policyRef": policies[i % len(policies)], "evaluationWindow": "7d",
            "logQuery": f"report:{p}-{i}"})
        for i in range(n["PolicyReport"])))
    add("permissions.yaml", *(
        doc("Permission", f"{p}-perm-{i}", {"description": f"permission {i}",
                                            "code": f"package perm{i}\n"})
        for i in range(n["Permission"])))
    add("labels.yaml", *(
        doc("DataLabel", f"{p}-label-{i}", {"classifierType": "regex",
                                            "classifierData": f"^{p}-{i}$"})
        for i in range(n["DataLabel"])))
    add("workflow.yaml", *(
        doc("LogQuery", f"{p}-query-{i}", {"query": {"query": f"n:{i}", "relativeTime": 3600}})
        for i in range(n["LogQuery"])))
    add("workflow.yaml", *(
        doc("Form", f"{p}-form-{i}", {"description": f"form {i}",
                                      "fields": [{"name": "why", "type": "text"}]})
        for i in range(n["Form"])))
    add("workflow.yaml", *(
        doc("ScenarioMonitor", f"{p}-monitor-{i}", {"status": "draft", "scenario": f"s{i}"})
        for i in range(n["ScenarioMonitor"])))
    add("sidecars.yaml", *(
        doc("Sidecar", f"{p}-sidecar-{i}", {"technology": "postgres",
                                            "hostname": f"sc{i}.{p}.internal"})
        for i in range(n["Sidecar"])))
    users = [f"{p}-nu-{i}" for i in range(n["NativeUser"])]
    add("native-users.yaml", *(
        doc("NativeUser", u, {"resourceId": _RESOURCES[i % len(_RESOURCES)],
                              "label": f"{p} native user {i}",
                              "credentials": {"cloudIamA": {"username": f"u{i}"}}})
        for i, u in enumerate(users)))
    add("native-users.yaml", *(
        doc("DataDiscoveryConfiguration", f"{p}-ddc-{i}", {
            "resourceId": _RESOURCES[i % len(users) % len(_RESOURCES)],
            "nativeUserRef": users[i % len(users)], "database": "db",
            "schedule": "0 2 * * *", "path": f"{p}.schema{i}", "deletionPolicy": "delete"})
        for i in range(n["DataDiscoveryConfiguration"])))
    add("aliases.yaml", *(
        doc("ResourceAlias", f"{p}-alias-{i}", {"resourceId": _RESOURCES[i % len(_RESOURCES)],
                                                "alias": f"{p}-alias-{i}"})
        for i in range(n["ResourceAlias"])))
    add("integrations.yaml", *(
        doc("LogIntegration", f"{p}-logs-{i}", {"logStoreB": {
            "site": "eu1.example", "accountId": f"acct-{i}",
            "apiKey": {"fromEnv": BIG_SECRET_VAR}}})
        for i in range(n["LogIntegration"])))
    add("loaders.yaml", *(
        doc("PolicyDataLoader", f"{p}-loader-{i}", {
            "key": f"k{i}", "workerRuntime": "python3.11", "workerSchedule": "0 */6 * * *",
            "workerCode": "def main():\n    return {}\n", "status": "draft"})
        for i in range(n["PolicyDataLoader"])))
    add("keys.yaml", *(
        doc("SigningKey", f"{p}-key-{i}", {"algorithm": "ed25519",
                                           "publicKey": f"-----BEGIN PUBLIC KEY-----\n{p}{i}\n"})
        for i in range(n["SigningKey"])))
    add("blocked.yaml", *(
        doc("BlockedUser", f"{p}-blocked-{i}", {"id": _USERS[i]})
        for i in range(n["BlockedUser"])))
    total = 0
    for file, docs in files.items():
        if docs:
            write_docs(directory / file, docs)
            total += len(docs)
    return total


# -- comparing state with the server ---------------------------------------------------


@dataclass(frozen=True)
class Wanted:
    """What the manifests say exists: address -> (kind, identifying value)."""

    objects: dict[str, tuple[str, Any]]

    @classmethod
    def load(cls, *paths: Path) -> Wanted:
        from govsync.manifests.loader import load

        manifests = load([str(p) for p in paths])
        return cls({a: (m.kind.name, identity(m.kind.name, m.template))
                    for a, m in manifests.objects.items()})

    def counts(self) -> Counter[str]:
        return Counter(kind for kind, _ in self.objects.values())

    def by_identity(self) -> dict[tuple[str, Any], str]:
        return {v: a for a, v in self.objects.items()}


def on_server(objects: Mapping[str, list[dict[str, Any]]], kind: str,
              value: Any) -> list[dict[str, Any]]:
    return [o for o in objects.get(kind, []) if identity(kind, o) == value]


def duplicates(objects: Mapping[str, list[dict[str, Any]]], wanted: Wanted) -> list[str]:
    """Addresses whose object exists more than once on the server."""
    return sorted(a for a, (kind, value) in wanted.objects.items()
                  if len(on_server(objects, kind, value)) > 1)


def settle(gov: Govsync, server: Server, wanted: Wanted) -> dict[str, str | None]:
    """Resolve every pending/uncertain entry by looking for its object on the server.

    Returns address -> the id it was resolved to (None: --absent).
    """
    objects = server.objects()
    resolved: dict[str, str | None] = {}
    for address, entry in gov.entries().items():
        if entry["status"] not in UNSETTLED:
            continue
        kind, value = wanted.objects[address]
        found = on_server(objects, kind, value)
        assert len(found) <= 1, f"{address} exists {len(found)} times on the server"
        if found:
            ident = object_id(kind, found[0])
            run = gov.invoke("state", "resolve", address, "--id", ident)
        else:
            ident = None
            run = gov.invoke("state", "resolve", address, "--absent")
        assert run.code == 0, run
        resolved[address] = ident
    return resolved


def check_consistent(gov: Govsync, server: Server, wanted: Wanted, *,
                     settled: bool) -> dict[str, dict[str, Any]]:
    """No duplicate; state and server agree on every object the manifests name.

    ``settled=False`` allows objects whose create is pending or uncertain in
    state (present on the server or not), and objects of idempotent creates
    on the server but not yet in state; ``settled=True`` requires every
    state entry applied and every manifest object in state.
    """
    objects = server.objects()
    entries = gov.entries()
    twice = duplicates(objects, wanted)
    assert not twice, f"on the server more than once: {twice}"
    problems: list[str] = []
    for address, (kind, value) in wanted.objects.items():
        found = on_server(objects, kind, value)
        entry = entries.get(address)
        if entry is None:
            # A create that is safe to repeat (an upsert: a connector's AI
            # provider, a blocked user) keeps no intent: after a crash the
            # next apply simply sends it again.
            if found and not (BY_KIND[kind].create.retry_safe and not settled):
                problems.append(f"{address}: on the server ({object_id(kind, found[0])}) "
                                "but not in state")
            if settled:
                problems.append(f"{address}: not in state")
            continue
        if entry["status"] in UNSETTLED:
            if settled:
                problems.append(f"{address}: still {entry['status']}")
            continue
        if entry["status"] != "applied":
            problems.append(f"{address}: status {entry['status']}")
        elif not found:
            problems.append(f"{address}: applied as {entry['id']} but not on the server")
        elif object_id(kind, found[0]) != entry["id"]:
            problems.append(f"{address}: state says {entry['id']}, the server has "
                            f"{object_id(kind, found[0])}")
    for address in entries.keys() - wanted.objects.keys():
        problems.append(f"{address}: in state but in no manifest")
    assert not problems, "\n".join(problems)
    return entries


def unique_workspace() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
