"""The project file, ``govsync.yaml``: one repository, several environments.

```yaml
apiVersion: govsync/v1
kind: Project
paths: [manifests/]                 # used when no PATH is given
vars: {retentionDays: 30}           # defaults for every environment
environments:
  staging:
    paths: [manifests/, envs/staging/]
    workspace: staging              # default: the environment's name
    endpoint: https://staging.governance.example.com
    state: postgresql://govsync@db.example.com/govsync
    vars: {retentionDays: 7}
```

It is found in the current directory or its nearest parent that has one,
or named by ``--project FILE`` / ``GOVSYNC_PROJECT``.  Paths in it are
relative to its own folder.  It is read as carefully as a manifest: every
error at its ``FILE:LINE:COL``, all at once.  The API key is never read
from it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from govsync import endpoints, redact
from govsync.api.kinds import BY_KIND
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.envvars import DEFAULT_STATE, LOCAL_DB
from govsync.envvars import OWN as OWN_VARIABLES
from govsync.errors import ConfigError, ManifestError, Problem
from govsync.files import display_path, inside, refused
from govsync.manifests.wording import closest, unknown_keys
from govsync.manifests.yamlio import RawDocument, iter_documents, locate, read_text

if TYPE_CHECKING:
    from govsync.agentconfig import AgentSettings
    from govsync.approvals import Approvals
    from govsync.impactconfig import ImpactSettings
    from govsync.rules import Rule

PROJECT_FILE = "govsync.yaml"
API_VERSION = "govsync/v1"
ENV_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TOP_KEYS = ("apiVersion", "kind", "paths", "workspace", "endpoint", "state", "apiKey",
            "viewerKey", "vars", "environments", "rules", "approvals", "agent", "ignoreChanges",
            "prune", "selfHeal", "impact")
ENV_KEYS = ("paths", "workspace", "endpoint", "state", "apiKey", "viewerKey", "vars", "agent",
            "prune", "selfHeal", "impact")
# Where a key comes from: ``{fromEnv: VARIABLE}``, never the key (the file is in git).
KEY_FIELDS = {"apiKey": "api_key", "viewerKey": "viewer_key"}
# Keys a user might put a credential under: refused with the reason.
_KEY_LIKE = re.compile(r"(?i)^(api[-_]?key|x-api-key|apikey|token|password|secret)$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The sections of the project file parsed by a module of their own, imported only when
# a file has the section (issue 31: the three and what they import are 10 ms of every
# command's start-up, and most projects have none of them).  Data, not code:
# docs/architecture.md's test reads this table as imports of project.py.
SECTIONS = {"rules": "govsync.rules", "approvals": "govsync.approvals",
            "agent": "govsync.agentconfig", "impact": "govsync.impactconfig"}


def section(name: str) -> ModuleType:
    """The module that parses the project file's section ``name`` (SECTIONS)."""
    return importlib.import_module(SECTIONS[name])


@dataclass(frozen=True)
class Environment:
    """One environment's settings (None: not set here)."""

    name: str
    paths: tuple[str, ...] | None = None
    workspace: str | None = None
    endpoint: str | None = None
    state: str | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    # The agent's settings here (contract section 9; None: none).
    agent: AgentSettings | None = None
    # The environment variables holding its API key and its viewer key (read-only
    # jobs): ``apiKey: {fromEnv: VAR}``; None: GOVSYNC_API_KEY.
    api_key: str | None = None
    viewer_key: str | None = None
    # Every orphan planned as a delete (contract section 12; None: not set here).
    prune: bool | None = None
    # Outside changes planned as the updates that undo them (None: not set here).
    self_heal: bool | None = None
    # What plan and the agent measure of a policy change's impact (None: not set here).
    impact: ImpactSettings | None = None


@dataclass(frozen=True)
class Project:
    """A loaded project file; paths already made relative to the current directory."""

    file: str
    top: Environment
    environments: Mapping[str, Environment]
    # Guardrails and approvals (contract section 8).
    rules: tuple[Rule, ...] = ()
    approvals: Approvals | None = None
    # Fields a refresh does not report as changed outside govsync, per kind (as Argo
    # CD's ignoreDifferences): {Hook: (description,)}.
    ignore_changes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def environment(self, name: str | None) -> Environment | None:
        """The environment called ``name`` (None: none selected); ConfigError if unknown."""
        if name is None:
            return None
        if name not in self.environments:
            known = ", ".join(sorted(self.environments)) or "none: the project has no environments"
            raise ConfigError(f"unknown environment {name!r} in {self.file}: known are {known}")
        return self.environments[name]

    def variables(self, env: Environment | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Top-level vars, overridden by the environment's, overridden by ``--var``."""
        return {**self.top.vars, **(env.vars if env else {}), **overrides}

    def agent(self, env: Environment | None) -> AgentSettings:
        """The agent's settings of ``env``: its own over the project's top level."""
        top = self.top.agent or section("agent").AgentSettings()
        return env.agent.over(top) if env is not None and env.agent is not None else top

    def paths(self, env: Environment | None) -> tuple[str, ...] | None:
        if env is not None and env.paths is not None:
            return env.paths
        return self.top.paths


def find(start: str = ".") -> str | None:
    """``govsync.yaml`` in ``start`` or its nearest parent that has one."""
    here = os.path.abspath(start)
    while True:
        candidate = os.path.join(here, PROJECT_FILE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def load(path: str) -> Project:
    """Read and check a project file; ManifestError with every problem."""

    shown = display_path(path)
    problem = refused(path, None, path)
    if problem is not None:
        raise ManifestError([Problem(shown, 1, 1, problem.message)])
    text, problem = read_text(path, shown)
    if problem is not None:
        raise ManifestError([problem])
    assert text is not None
    docs = [d for d in iter_documents(text, shown)]
    problems = [d for d in docs if isinstance(d, Problem)]
    if problems:
        raise ManifestError(problems)
    raw = [d for d in docs if isinstance(d, RawDocument) and d.value is not None]
    if len(raw) != 1:
        raise ManifestError([Problem(shown, 1, 1, "a project file holds one document "
                                                  "(apiVersion: govsync/v1, kind: Project)")])
    return _check(raw[0], os.path.dirname(path))


def _check(doc: Any, base: str) -> Project:

    problems: list[Problem] = []

    def problem(where: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        problems.append(Problem(doc.file, *locate(doc.root, where, key=key), message))

    value = doc.value
    if not isinstance(value, dict):
        raise ManifestError([Problem(doc.file, doc.line, doc.col,
                                     "a project file is a mapping with apiVersion, kind: Project, "
                                     "paths, vars and environments")])
    _keys(value, (), TOP_KEYS, problem)
    if value.get("apiVersion") != API_VERSION:
        problem(("apiVersion",) if "apiVersion" in value else (),
                f"apiVersion must be {API_VERSION}")
    if value.get("kind") != "Project":
        problem(("kind",) if "kind" in value else (), "kind must be Project")
    top = _environment("", value, (), base, problem)
    environments: dict[str, Environment] = {}
    envs = value.get("environments", {})
    if envs is None:
        envs = {}
    if not isinstance(envs, dict):
        problem(("environments",), "environments must be a mapping of names to settings")
        envs = {}
    for name, body in envs.items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            problem(("environments", name), f"environment name {name!r}: use letters, digits, "
                    "'.', '_' and '-'", key=True)
            continue
        if body is None:
            body = {}
        if not isinstance(body, dict):
            problem(("environments", name), f"environment {name} must be a mapping of settings")
            continue
        _keys(body, ("environments", name), ENV_KEYS, problem)
        env = _environment(name, body, ("environments", name), base, problem)
        environments[name] = dataclasses.replace(env, workspace=env.workspace or name)

    def at(where: tuple[Any, ...]) -> tuple[int, int]:
        line, col = locate(doc.root, where)
        return int(line), int(col)

    names = sorted(environments)
    the_rules = (section("rules").parse(value["rules"], doc.file, at, problem, names)
                 if value.get("rules") is not None else ())
    the_approvals = (section("approvals").parse(value["approvals"], doc.file, at, problem,
                                                names, base)
                     if value.get("approvals") is not None else None)
    ignore = _ignore_changes(value.get("ignoreChanges"), problem)
    if problems:
        raise ManifestError(problems)
    return Project(doc.file, top, environments, the_rules, the_approvals, ignore)


def _ignore_changes(value: Any, problem: Any) -> dict[str, tuple[str, ...]]:
    """``ignoreChanges: {Kind: [field, ...]}``: known kinds, dotted field paths."""
    if value is None:
        return {}
    where = ("ignoreChanges",)
    if not isinstance(value, dict):
        problem(where, "ignoreChanges must map kinds to lists of fields, e.g. "
                "{Hook: [description]}")
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for kind, fields in value.items():
        if kind not in BY_KIND:
            hint = closest(str(kind), list(BY_KIND))
            problem((*where, kind), f"ignoreChanges: unknown kind {kind!r}"
                    + (f" (did you mean {hint}?)" if hint else ""), key=True)
            continue
        if not isinstance(fields, list) or not all(
                isinstance(f, str) and f.strip() for f in fields):
            problem((*where, kind), f"ignoreChanges.{kind} must be a list of field names "
                    "(dotted paths such as config.providerA.model)")
            continue
        out[kind] = tuple(f.strip().removeprefix("spec.") for f in fields)
    return out


def _keys(body: dict[Any, Any], at: tuple[Any, ...], allowed: tuple[str, ...],
          problem: Any) -> None:

    credentials = {k for k in body if isinstance(k, str) and _KEY_LIKE.match(k)
                   and not (k in KEY_FIELDS and _from_env(body[k]))}
    for key in credentials:
        problem((*at, key), f"{key}: the API key is never read from the project file (it is "
                f"committed to git): write {key}: {{fromEnv: VARIABLE}} and set that variable "
                f"(or {API_KEY_ENV}) in the environment instead", key=True)
    unknown_keys({k: v for k, v in body.items() if k not in credentials}, at, allowed, problem)


def _environment(name: str, body: dict[str, Any], at: tuple[Any, ...], base: str,
                 problem: Any) -> Environment:
    paths = body.get("paths")
    if paths is not None:
        if not isinstance(paths, list) or not paths or not all(
                isinstance(p, str) and p for p in paths):
            problem((*at, "paths"), "paths must be a non-empty list of folders or files")
            paths = None
        else:
            paths = tuple(display_path(os.path.join(base, p)) for p in paths)
    strings = {}
    for key in ("workspace", "endpoint", "state"):
        item = body.get(key)
        if item is not None and (not isinstance(item, str) or not item):
            problem((*at, key), f"{key} must be a non-empty string")
            item = None
        strings[key] = item
    if strings["state"] and "://" not in strings["state"] and not os.path.isabs(strings["state"]):
        strings["state"] = display_path(os.path.join(base, strings["state"]))
    variables = body.get("vars", {})
    if variables is None:
        variables = {}
    if not isinstance(variables, dict):
        problem((*at, "vars"), "vars must be a mapping of variable names to values")
        variables = {}
    for key in variables:
        if not isinstance(key, str) or not VAR_NAME.match(key):
            problem((*at, "vars", key), f"variable name {key!r}: start with a letter or '_' and "
                    "use only letters, digits and '_'", key=True)
    agent = (section("agent").parse(body["agent"], (*at, "agent"), base, problem)
             if body.get("agent") is not None else None)
    keys: dict[str, str | None] = {}
    for key, attribute in KEY_FIELDS.items():
        keys[attribute] = variable = _from_env(body.get(key))
        if variable is not None and variable in OWN_VARIABLES - {API_KEY_ENV}:
            problem((*at, key, "fromEnv"), f"{key}.fromEnv: {variable} is one of govsync's own "
                    "settings, not a key: name the variable that holds the key")
            keys[attribute] = None
    flags: dict[str, bool | None] = {}
    for key, meaning in (("prune", "every orphan is planned as a delete"),
                         ("selfHeal", "what changed outside govsync is put back")):
        flag = body.get(key)
        if flag is not None and not isinstance(flag, bool):
            problem((*at, key), f"{key} must be true ({meaning}) or false")
            flag = None
        flags[key] = flag
    impact = (section("impact").parse(body["impact"], (*at, "impact"), base, problem)
              if body.get("impact") is not None else None)
    return Environment(name, paths, strings["workspace"], strings["endpoint"], strings["state"],
                       dict(variables), agent, **keys, prune=flags["prune"],
                       self_heal=flags["selfHeal"], impact=impact)


def _from_env(value: Any) -> str | None:
    """VARIABLE of ``{fromEnv: VARIABLE}`` (None: not that shape)."""
    if isinstance(value, dict) and set(value) == {"fromEnv"}:
        variable = value["fromEnv"]
        if isinstance(variable, str) and _VARIABLE.match(variable):
            return variable
    return None


def parse_var(text: str) -> tuple[str, Any]:
    """``--var NAME=VALUE``: VALUE read as a YAML scalar (``7`` is a number, ``"7"`` a string)."""

    name, sep, raw = text.partition("=")
    if not sep or not VAR_NAME.match(name):
        raise ConfigError(f"--var {text!r}: write --var NAME=VALUE (NAME: letters, digits, '_')")
    docs = list(iter_documents(raw, f"--var {name}")) if raw.strip() else []
    if not docs:
        return name, None
    doc = docs[0]
    if not isinstance(doc, RawDocument) or isinstance(doc.value, dict | list) or len(docs) > 1:
        raise ConfigError(f"--var {name}: the value must be a YAML scalar (a string, number, "
                          "boolean or null); put structured values in the project file's vars")
    return name, doc.value


class SettingValue(NamedTuple):
    """A global setting's value as the command line got it, where from (``option``,
    ``environment`` or ``default``), and its names for messages."""

    value: str | None
    source: str
    flag: str
    variable: str


def same_setting(key: str, a: str, b: str) -> bool:
    """Whether two settings name the same place (credentials and query aside)."""
    if key == "workspace":
        return a == b
    if "://" in a and "://" in b:
        return endpoints.same(a, b)
    if "://" not in a and "://" not in b and key == "state":
        return os.path.realpath(a) == os.path.realpath(b)
    return a.strip().rstrip("/") == b.strip().rstrip("/")


@dataclass(frozen=True)
class Selection:
    """The project (if any), the environment chosen (if any) and ``--var`` overrides."""

    project: Project | None = None
    environment: Environment | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str | None:
        return self.environment.name if self.environment else None

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The project's guardrail rules (none without a project)."""
        return self.project.rules if self.project is not None else ()

    @property
    def prune(self) -> bool:
        """Whether every orphan is planned as a delete: the environment's ``prune``, else
        the project's (contract section 12)."""
        if self.environment is not None and self.environment.prune is not None:
            return self.environment.prune
        return bool(self.project is not None and self.project.top.prune)

    @property
    def self_heal(self) -> bool:
        """Whether the updates that undo outside changes are planned (``selfHeal: true`` of
        the environment, else of the project); without it drift is reported only."""
        if self.environment is not None and self.environment.self_heal is not None:
            return self.environment.self_heal
        return bool(self.project is not None and self.project.top.self_heal)

    @property
    def impact(self) -> ImpactSettings | None:
        """The impact settings of the environment over the project's (None: neither)."""
        top = self.project.top.impact if self.project is not None else None
        env = self.environment.impact if self.environment is not None else None
        return env.over(top) if env is not None else top

    @property
    def ignore_changes(self) -> Mapping[str, tuple[str, ...]]:
        """Fields a refresh does not report, per kind (none without a project)."""
        return self.project.ignore_changes if self.project is not None else {}

    def variables(self) -> dict[str, Any]:
        if self.project is None:
            return dict(self.overrides)
        return self.project.variables(self.environment, self.overrides)

    def paths(self, given: tuple[str, ...] | list[str]) -> list[str]:
        """The paths given on the command line, else the project's (environment's first)."""
        if given:
            return list(given)
        found = self.project.paths(self.environment) if self.project else None
        if not found:
            where = (f"and {self.project.file} names none" if self.project
                     else "and there is no govsync.yaml here or above")
            raise ConfigError(f"no manifest paths given {where}: pass PATH... or set paths in "
                              "the project file")
        return list(found)

    def setting(self, name: str) -> str | None:
        """An environment's setting, else the project's top level (None: neither)."""
        for env in (self.environment, self.project.top if self.project else None):
            value = getattr(env, name, None) if env is not None else None
            if value is not None:
                return str(value)
        return None

    def choose(self, key: str, given: SettingValue) -> str | None:
        """A global setting (``endpoint``, ``state``, ``workspace``): the command-line
        option, else its environment variable, else the environment's entry, else
        the project's top level, else the default.

        An environment variable that contradicts what the selected environment sets
        is a ConfigError naming both (a leftover ``export GOVSYNC_ENDPOINT=local``
        must not send prod's changes elsewhere).  Credentials do not count as a
        difference: a state URL with the CI's reader role names the same database
        as the project's."""
        if given.source == "option":
            return given.value
        mine = getattr(self.environment, key, None) if self.environment else None
        if given.source == "environment" and given.value:
            if mine is not None and not same_setting(key, given.value, str(mine)):
                assert self.environment is not None and self.project is not None
                raise ConfigError(
                    f"{given.variable}={redact.url(given.value)} contradicts environment "
                    f"{self.environment.name} of {self.project.file}, whose {key} is "
                    f"{redact.url(str(mine))}: unset {given.variable} (or give {given.flag} "
                    "to override it on purpose); nothing was sent")
            return given.value
        found = self.setting(key)
        if found is not None:
            return found
        return self.default(key)

    def default(self, key: str) -> str | None:
        """The built-in default: the state and the embedded server's database live beside
        the project file (not in whatever folder the command runs from)."""
        files = {"state": DEFAULT_STATE, "local_db": LOCAL_DB}
        if key not in files:
            return "default" if key == "workspace" else None
        if self.project is None:
            return files[key]
        return display_path(os.path.join(os.path.dirname(os.path.abspath(self.project.file)),
                                         files[key]))

    def check_overrides(self, overrides: Mapping[str, Any]) -> None:
        """ConfigError for a ``--var`` that no ``vars`` declares (a typo is not ignored)."""
        if self.project is None:
            return
        declared = set(self.project.top.vars)
        for env in self.project.environments.values():
            declared |= set(env.vars)
        unknown = sorted(set(overrides) - declared)
        if unknown:
            name = unknown[0]
            near = closest(name, sorted(declared))
            hint = f"did you mean {near!r}? " if near else ""
            listed = ", ".join(sorted(declared)) or "none"
            raise ConfigError(f"--var {name}: no vars of {self.project.file} declares it: "
                              f"{hint}declared are {listed}")

    def outside(self, root: str, also: tuple[str | None, ...] = ()) -> str:
        """Why this selection would read a file outside ``root`` (an agent's checkout),
        naming the first such path; '' when it reads none.  What it reads: its manifest
        paths, the project file, the allowed-signers file, impact's file of recorded
        inputs and ``also`` (the agent's plans folder), each with its symbolic links
        followed."""
        read: list[str | None] = list(self.paths(()))
        if self.project is not None:
            read.append(self.project.file)
            if self.project.approvals is not None:
                read.append(self.project.approvals.allowed_signers)
        if self.impact is not None:
            read.append(self.impact.from_file)
        for path in (*read, *also):
            if path and not inside(path, root):
                return (f"{path} is outside the agent's checkout {root} (an absolute or "
                        "../ path, or a symbolic link leading out): the agent reads only "
                        "files of its repository; fix the path in the project file")
        return ""

    def each_environment(self) -> list[Selection]:
        """``validate`` with no --env: one selection per environment (or just this one)."""
        if self.project is None or self.environment is not None or not self.project.environments:
            return [self]
        return [Selection(self.project, env, self.overrides)
                for _, env in sorted(self.project.environments.items())]


def select(project_file: str | None, env: str | None, variables: list[str]) -> Selection:
    """The selection for ``--project``/``--env``/``--var`` (and their environment variables)."""
    path = project_file or find()
    if project_file and not os.path.isfile(project_file):
        raise ConfigError(f"--project {project_file}: no such file")
    project = load(path) if path else None
    if env is not None and project is None:
        raise ConfigError(f"--env {env}: there is no govsync.yaml here or above (and no "
                          "--project FILE) to define environments")
    overrides = dict(parse_var(v) for v in variables)
    selection = Selection(project, project.environment(env) if project else None, overrides)
    selection.check_overrides(overrides)
    return selection
