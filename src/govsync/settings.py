"""The global options of every command, resolved: plain values, frozen.

``govsync.cli`` builds them from the options, environment variables and project
file (``project.Selection.choose``); ``runtime.py`` alone turns them into a
state store and an API client.  Lower layers take the narrow values they
need, never this object.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from govsync import envvars, redact
from govsync.errors import ConfigError
from govsync.project import Selection, SettingValue

WORKSPACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


@dataclass(frozen=True)
class Settings:
    """The global options of every command."""

    endpoint: str | None = None
    api_key: str | None = field(default=None, repr=False)
    state: str = envvars.DEFAULT_STATE
    workspace: str = envvars.DEFAULT_WORKSPACE
    insecure_http: bool = False
    local_seed: str | None = None
    # Where ``--endpoint local`` keeps the embedded server's objects.
    local_db: str = envvars.LOCAL_DB
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    # --target patterns: only these addresses and what they depend on.
    targets: tuple[str, ...] = ()
    # --replace addresses: created anew, references moved, the old ones deleted.
    replace: tuple[str, ...] = ()
    # The project file's environment and variables (empty without a project).
    selection: Selection = field(default_factory=Selection)
    # The environment variable the key was read from (an environment's
    # ``apiKey: {fromEnv: VAR}``, else GOVSYNC_API_KEY): errors name it.
    key_variable: str = envvars.API_KEY
    # Read every recorded object from the server before planning (--refresh=false: no).
    refresh: bool = True
    # The values of the manifests' secrets ({fromEnv: VAR}), once the manifests are read
    # (``with_manifest_secrets``): no answer of the API is shown or kept with one.
    hidden: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not WORKSPACE_NAME.match(self.workspace):
            raise ConfigError(
                f"invalid workspace name {self.workspace!r}: use letters, digits, '.', '_' "
                "and '-' (at most 64 characters)")


    def secrets(self) -> tuple[str, ...]:
        """Every secret value this run knows, which no answer of the API is shown,
        written or recorded with (the client scrubs them: ``values.scrub``): the API
        key, govsync's own credentials (the state URL's password, the plan-key
        passphrase, the dashboard's token, the webhook's secret), the keys of every
        environment of the project (the variables its ``apiKey`` and ``viewerKey``
        name) and the manifests' secrets (``hidden``)."""
        env = self.environ
        found = [self.api_key or "", *self.hidden,
                 *(env.get(n, "") for n in sorted(envvars.CREDENTIALS - {envvars.STATE})),
                 *redact.passwords(self.state), *redact.passwords(env.get(envvars.STATE, ""))]
        project = self.selection.project
        if project is not None:
            for each in (project.top, *project.environments.values()):
                found += [env.get(v, "") for v in (each.api_key, each.viewer_key) if v]
        return tuple(dict.fromkeys(s for s in found if s))

    @property
    def key_source(self) -> str:
        """Where the key came from, for messages: ``PROD_API_KEY (environment prod)``."""
        name = self.selection.name
        return f"{self.key_variable} (environment {name})" if name else self.key_variable


def api_key(selection: Selection, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The API key of ``selection``'s environment and the variable it was read from.

    The variable its ``apiKey: {fromEnv: VAR}`` names (else the project's top level,
    else GOVSYNC_API_KEY); where that is unset, the one its ``viewerKey`` names, so a
    job given only the viewer key (a pull request's plan, a drift check) reads with it."""
    variable = selection.setting("api_key") or envvars.API_KEY
    key = environ.get(variable) or None
    viewer = selection.setting("viewer_key")
    if key is None and viewer and environ.get(viewer):
        return environ[viewer], viewer
    return key, variable


def resolve(selection: Selection, *, endpoint: SettingValue, state: SettingValue, workspace: SettingValue,
            environ: Mapping[str, str], insecure_http: bool = False,
            local_seed: str | None = None) -> Settings:
    """The settings of ``selection`` (a project's environment, or none) from the global
    options as given (``Selection.choose``: option, environment variable, the
    environment's entry, the project's top level, the default) and the environment
    variables ``environ`` (the key: ``api_key``)."""
    key, variable = api_key(selection, environ)
    return Settings(
        endpoint=selection.choose("endpoint", endpoint) or None,
        api_key=key,
        key_variable=variable,
        environ=environ,
        state=selection.choose("state", state) or envvars.DEFAULT_STATE,
        workspace=selection.choose("workspace", workspace) or envvars.DEFAULT_WORKSPACE,
        insecure_http=insecure_http,
        local_seed=local_seed,
        local_db=selection.default("local_db") or envvars.LOCAL_DB,
        selection=selection,
    )
