"""The root of the command line: the group, its flags, the options every command shares,
and the console script.

Each command lives in a module of this package, loaded when that command runs
(click's lazily loaded subcommands): ``govsync validate`` never imports the
plan's renderers or the apply engine.  COMMANDS is the table.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from govsync import __version__, envvars
from govsync.cli.forkread import forked_reader
from govsync.cli.scope import given, new_state_said, replaced_paths, require_environment
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.envvars import DEFAULT_STATE
from govsync.envvars import LOG as LOG_ENV
from govsync.errors import GovsyncError, ManifestError
from govsync.files import exposed_state
from govsync.manifests import load as load_manifests
from govsync.manifests.manifest import Context, ManifestSet
from govsync.project import Selection, section, select
from govsync.settings import Settings, resolve

F = TypeVar("F", bound=Callable[..., Any])


class Output:
    """Verbosity and color, from -v/-q/--no-color/NO_COLOR and the terminal."""

    def __init__(self, verbose: int = 0, quiet: bool = False, no_color: bool = False) -> None:
        self.verbose = verbose
        self.quiet = quiet
        self.color = not no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()

    def info(self, message: str) -> None:
        if not self.quiet:
            click.echo(message, err=True)


def out(ctx: click.Context | None = None) -> Output:
    ctx = ctx or click.get_current_context()
    obj = ctx.find_object(Output)
    return obj if obj is not None else Output()


_GLOBAL_FLAGS = re.compile(r"^(-v+|--verbose|-q|--quiet|--no-color)$")
_LONG = {"v": "--verbose", "q": "--quiet"}


# Each command: "module:attribute" in this package, imported when the command is run
# (or listed by --help and `govsync docs`).
COMMANDS = {
    "validate": "check:validate",
    "test": "testing:test_command",
    "environments": "environments:environments_command",
    "plan": "plan:plan",
    "apply": "apply:apply",
    "drift": "workflow:drift",
    "graph": "workflow:graph_command",
    "show": "workflow:show_command",
    "approve": "workflow:approve",
    "state": "state:state",
    "audit": "state:audit",
    "ui": "dashboard:ui_command",
    "agent": "agent:agent_command",
    "schema": "tools:schema",
    "serve": "serve:serve",
    "migrate": "tools:migrate",
    "import": "importing:import_command",
    "fmt": "tools:fmt_command",
    "init": "tools:init_command",
    "docs": "tools:docs_command",
}


class GovsyncGroup(click.Group):
    """Turns every GovsyncError into its message and exit 1, never a traceback.

    The group's own flags (-v, -q, --no-color) are accepted after the
    subcommand too (``govsync plan -v``), as every other option is.  Its
    commands are COMMANDS, each loaded when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name].split(":")
        command: click.Command = getattr(importlib.import_module(f"govsync.cli.{module}"),
                                         attribute)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None and args:
            head: list[str] = []
            rest: list[str] = []
            for i, arg in enumerate(args):
                if arg == "--":
                    rest.extend(args[i:])
                    break
                if not _GLOBAL_FLAGS.match(arg):
                    rest.append(arg)
                elif arg.startswith("--"):
                    head.append(arg)
                else:
                    # Spelled long: click tries every short flag as a long one
                    # first, and its failure imports difflib to suggest one.
                    head.extend(_LONG[arg[1]] for _ in arg[1:])
            args = head + rest
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ManifestError as exc:
            for problem in exc.problems:
                click.echo(str(problem), err=True)
            n = len(exc.problems)
            click.echo(
                f"{n} error{'s' if n != 1 else ''}; nothing was sent and the state is untouched.",
                err=True,
            )
            ctx.exit(1)
        except GovsyncError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(1)


def project_options(func: F) -> F:
    """--project, --env, --var collapsed into one ``selection`` argument."""

    @click.option("--project", "project_file", envvar=envvars.PROJECT, show_envvar=True,
                  metavar="FILE",
                  help="The project file (default: govsync.yaml here or in the nearest "
                       "parent folder that has one).")
    @click.option("--env", "env_name", envvar=envvars.ENV, show_envvar=True, metavar="NAME",
                  help="The project's environment: its paths, workspace, endpoint, state and "
                       "variables.")
    @click.option("--var", "variables", multiple=True, metavar="NAME=VALUE",
                  help="Set a variable (VALUE read as a YAML scalar); overrides the project's.")
    @functools.wraps(func)
    def wrapper(*args: Any, project_file: str | None, env_name: str | None,
                variables: tuple[str, ...], **kwargs: Any) -> Any:

        return func(*args, selection=select(project_file, env_name or None, list(variables)),
                    **kwargs)

    return wrapper  # type: ignore[return-value]


def global_options(func: F) -> F:
    """--endpoint, --state, --workspace... and the project's environment, collapsed into
    one ``settings`` argument.  Precedence, highest first: the option, its environment
    variable, the environment's entry in govsync.yaml, its top level, the default."""

    @click.option("--endpoint", envvar=envvars.ENDPOINT, show_envvar=True, metavar="URL",
                  help="API base URL, or `local` for the embedded reference server. The key "
                       f"comes from {API_KEY_ENV}, or the variable the environment's "
                       "apiKey names.")
    @click.option("--state", "state_url", envvar=envvars.STATE, default=DEFAULT_STATE,
                  show_default=True, show_envvar=True, metavar="URL",
                  help="State store: a SQLite file, or a postgresql:// URL.")
    @click.option("--workspace", envvar=envvars.WORKSPACE, default=envvars.DEFAULT_WORKSPACE, show_default=True,
                  show_envvar=True, help="Workspace within the state store.")
    @click.option("--insecure-http", is_flag=True, envvar=envvars.INSECURE_HTTP, show_envvar=True,
                  help="Allow a plain http:// endpoint on a non-loopback host.")
    @click.option("--local-seed", envvar=envvars.LOCAL_SEED, show_envvar=True,
                  metavar="FILE",
                  type=click.Path(exists=True, dir_okay=False),
                  help="With --endpoint local: preload the embedded server with this seed.")
    @project_options
    @functools.wraps(func)
    def wrapper(*args: Any, endpoint: str | None, state_url: str, workspace: str,
                insecure_http: bool, local_seed: str | None, selection: Selection,
                **kwargs: Any) -> Any:
        ctx = click.get_current_context()

        state = given(ctx, "state_url", state_url, "--state", envvars.STATE)
        settings = resolve(
            selection,
            endpoint=given(ctx, "endpoint", endpoint, "--endpoint", envvars.ENDPOINT),
            state=state,
            workspace=given(ctx, "workspace", workspace, "--workspace", envvars.WORKSPACE),
            environ=os.environ,
            insecure_http=insecure_http,
            local_seed=local_seed,
        )
        exposed = exposed_state(settings.state)
        if exposed:
            click.echo(f"warning: {exposed}", err=True)
        require_environment(selection, ctx.command.name or "")
        with new_state_said(settings, defaulted=state.source == "default"):
            return func(*args, settings=settings, **kwargs)

    return wrapper  # type: ignore[return-value]


paths_argument = click.argument("paths", nargs=-1, type=click.Path())


def replace_option(func: F) -> F:
    """--replace ADDR (repeatable), stored on ``settings``."""

    @click.option("--replace", "replace", multiple=True, metavar="ADDR",
                  help="Replace this object (Kind/name): create a new one, move every "
                       "reference to it, then delete the old one; repeatable.")
    @functools.wraps(func)
    def wrapper(*args: Any, replace: tuple[str, ...], settings: Settings, **kwargs: Any) -> Any:
        return func(*args, settings=dataclasses.replace(settings, replace=replace), **kwargs)

    return wrapper  # type: ignore[return-value]


def target_option(func: F) -> F:
    """--target PATTERN (repeatable), stored on ``settings``."""

    @click.option("--target", "targets", multiple=True, metavar="PATTERN",
                  help="Only this address (or glob, e.g. 'Hook/*') and what it depends on; "
                       "repeatable. The summary counts what was left out.")
    @functools.wraps(func)
    def wrapper(*args: Any, targets: tuple[str, ...], settings: Settings, **kwargs: Any) -> Any:
        return func(*args, settings=dataclasses.replace(settings, targets=targets), **kwargs)

    return wrapper  # type: ignore[return-value]


def allow_endpoint_change_option(func: F) -> F:
    """``--allow-endpoint-change`` of plan, drift and apply: the endpoint given is where
    the workspace's objects are now, though the state records another."""
    return click.option(
        "--allow-endpoint-change", is_flag=True,
        help="The state was applied against another endpoint and the objects are at "
             "this one now: read (and apply) it. Without it nothing is sent to an "
             "endpoint the state does not record.")(func)


def refresh_option(func: F) -> F:
    """--refresh=false, stored on ``settings``."""

    @click.option("--refresh", "refresh", type=click.BOOL, default=True, show_default=True,
                  metavar="BOOL",
                  help="Read every recorded object from the server first, and show what "
                       "changed outside govsync or is missing (--refresh=false: compare with "
                       "the recorded state only).")
    @functools.wraps(func)
    def wrapper(*args: Any, refresh: bool, settings: Settings, **kwargs: Any) -> Any:
        return func(*args, settings=dataclasses.replace(settings, refresh=refresh), **kwargs)

    return wrapper  # type: ignore[return-value]


def load(paths: tuple[str, ...] | list[str], selection: Selection | None = None, *,
         short: bool = False, code: bool = False, rules: bool = False) -> ManifestSet:
    """Load manifests as a short-lived process should.

    The cyclic garbage collector is paused while loading and the loaded
    objects are frozen out of it afterwards: loading makes a million small
    acyclic objects, which the collector would otherwise scan again and again
    for nothing (a fifth of the time at 10,000 documents).  With ``short``
    (plan, validate, drift: the command ends soon after) it stays paused: the
    state's snapshot and the plan are as acyclic, and at 100,000 objects the
    collector would spend 0.25 s rescanning them.  Large sets are read in two
    processes (fork).  These are process-wide acts, so they are the entry
    point's choice, not the library's.  ``code``: validate's checks of code too.
    ``rules``: the command evaluates the project's rules (validate, plan, apply, drift):
    their evaluator starts while the manifests are read.
    """

    selection = selection or Selection()
    if rules and selection.rules:
        section("rules").warm()  # its module: loaded already, where it parsed the rules
    context = Context(selection.variables(), selection.name)
    note = replaced_paths(selection, paths)
    if note:
        click.echo(note, err=True)

    enabled = gc.isenabled()
    gc.disable()
    try:
        manifests = load_manifests(selection.paths(paths), read=forked_reader, context=context,
                                   code=code)
    finally:
        if enabled and not short:
            gc.enable()
    gc.freeze()
    return manifests
FORMATS = click.Choice(["text", "json", "markdown"])


@click.group(cls=GovsyncGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="govsync")
@click.option("-v", "--verbose", count=True, help="Show more (unchanged objects, details).")
@click.option("-q", "--quiet", is_flag=True, help="Show only results and errors.")
@click.option("--no-color", is_flag=True, help="Plain output (also: NO_COLOR=1).")
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: bool, no_color: bool) -> None:
    """govsync: access-governance configuration as code.

    Keep spaces, connectors, policies, hooks, integrations and the rest as
    YAML manifests in git; plan on every pull request, apply on merge, check
    for drift on a schedule.

    \b
    Example:
      govsync validate manifests/
      govsync plan manifests/ --endpoint local
      govsync apply manifests/ --endpoint local --auto-approve

    Logs: GOVSYNC_LOG=debug|info|warning writes them to stderr (every API
    call: operation, status, duration, retries; never a secret or the key).
    """
    # Also without GOVSYNC_LOG: it undoes an earlier invocation's set-up in this process.
    # Where logging is not loaded yet there is nothing to undo, and logs (with logging
    # and traceback: 3 ms of every start-up) is not loaded either.
    wanted = os.environ.get(LOG_ENV)
    if wanted or "logging" in sys.modules:
        from govsync import logs

        logs.configure(wanted, hidden=[os.environ.get(API_KEY_ENV, "")])
    ctx.obj = Output(verbose, quiet, no_color)


def json_errors(func: F) -> F:
    """A command with ``--format json`` that fails prints a JSON error document on stdout
    (render.documents.error_public) before its message on stderr and exit 1, so that a
    script reading stdout always reads JSON.  Put it right under ``@click.command``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except GovsyncError as exc:
            if kwargs.get("fmt") == "json":
                from govsync.render.documents import dumps, error_public

                click.echo(dumps(error_public(exc)), nl=False)
            raise

    return wrapper  # type: ignore[return-value]


def echo_json(data: Any) -> None:
    """Indented, sorted JSON on stdout (the state commands' --format json)."""
    import json  # 2 ms: where a command writes JSON, not at every start

    click.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def main() -> None:
    """The console script.  Exits without tearing the interpreter down: after a
    large plan, freeing a million objects one by one takes a tenth of a second
    and achieves nothing.  Everything is flushed and closed before."""
    # httpx imports its own command line (rich, pygments: about 60 ms) whenever
    # those are installed, as they are beside govsync; govsync never runs it
    # (fixed upstream in pydantic/httpx2#947).  Without it, httpx falls back to
    # a stub.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    # A plan makes hundreds of thousands of small acyclic objects (changes,
    # dicts, JSON); with the default thresholds (700, 10, 10) the collector
    # scans them again and again: at 100,000 objects, 2.5 s of 6.  Collecting
    # less often keeps cycles collected at a tenth of the cost.

    gc.set_threshold(50_000, 20, 100)
    try:
        cli(prog_name="govsync")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        code = code or 1
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()

