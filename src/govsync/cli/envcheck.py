"""Each environment's settings as a job would resolve them, and what is missing or
contradicts what (``govsync environments``, ``--check``): one line each, never a
traceback, so that a CI job can say exactly which variable or secret to set.
Listing never fails on settings: a contradiction is that environment's problem."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from govsync import envvars
from govsync.errors import ConfigError
from govsync.project import Environment, Selection, SettingValue
from govsync.settings import api_key

_GLOBALS = (("endpoint", "--endpoint", envvars.ENDPOINT),
            ("state", "--state", envvars.STATE),
            ("workspace", "--workspace", envvars.WORKSPACE))


@dataclass
class Resolved:
    """One environment resolved from the environment variables ``environ``."""

    name: str
    values: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # What is fine on one machine and wrong in a CI job (the default SQLite state):
    # said, never a failure of ``--check``.
    warnings: list[str] = field(default_factory=list)
    # The environment variables (GOVSYNC_STATE...) that contradict what govsync.yaml
    # sets for it: a CI job's repository-wide values, which are not for it.
    contradicting: list[str] = field(default_factory=list)


def resolve(selection: Selection, env: Environment, environ: Mapping[str, str],
            *, read_only: bool = False) -> Resolved:
    """``env``'s workspace, endpoint, state and key variables; every problem a job
    running it would meet (``read_only``: a pull request's or a drift job, which
    may hold the viewer key instead of the key)."""
    chosen = Selection(selection.project, env, selection.overrides)
    row = Resolved(env.name)
    for setting, flag, name in _GLOBALS:
        value = environ.get(name) or None
        given = SettingValue(value, "environment" if value else "default", flag, name)
        try:
            row.values[setting] = chosen.choose(setting, given)
        except ConfigError as exc:
            row.values[setting] = None
            row.contradicting.append(name)
            row.problems.append(str(exc).replace("; nothing was sent", ""))
    if not row.values.get("endpoint") and envvars.ENDPOINT not in row.contradicting:
        row.problems.append(f"no endpoint: set environments.{env.name}.endpoint in "
                            f"{chosen.project.file if chosen.project else 'govsync.yaml'}, "
                            f"or the variable {envvars.ENDPOINT}")
    if chosen.setting("state") is None and not environ.get(envvars.STATE):
        row.warnings.append(f"no state set: the default SQLite file "
                            f"{envvars.DEFAULT_STATE} is used, fine on one machine; a CI "
                            f"job's own would be new and empty each run: set "
                            f"environments.{env.name}.state in "
                            f"{chosen.project.file if chosen.project else 'govsync.yaml'}, "
                            f"or {envvars.STATE}, for a state jobs share")
    key, variable = api_key(chosen, environ)
    viewer = chosen.setting("viewer_key")
    row.values["apiKey"] = chosen.setting("api_key") or envvars.API_KEY
    row.values["viewerKey"] = viewer
    if row.values.get("endpoint") != "local" and key is None:
        wanted = row.values["apiKey"] + (f" (or {viewer})" if read_only and viewer else "")
        row.problems.append(f"{wanted} is not set: the API key of environment {env.name}")
    elif not read_only and variable == viewer and viewer:
        row.problems.append(f"{row.values['apiKey']} is not set: apply needs the key of "
                            f"environment {env.name}, not its viewer key ({viewer})")
    return row


def every(selection: Selection, environ: Mapping[str, str], *,
          read_only: bool = False) -> list[Resolved]:
    """Every environment of the project, in its file's order (none without one; only
    the selected one with --env)."""
    project = selection.project
    if project is None:
        return []
    chosen = ([selection.environment] if selection.environment is not None
              else project.environments.values())
    return [resolve(selection, env, environ, read_only=read_only) for env in chosen]
