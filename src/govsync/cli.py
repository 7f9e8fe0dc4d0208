"""The command line: parse, call one library function, render.

Heavy modules (httpx, rich, networkx, the server) are imported inside the
commands that need them, so ``govsync validate`` and ``govsync plan`` on a
few dozen objects start fast.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from govsync import __version__, approvals, commands, envvars, logs, planfile, render
from govsync.agentconfig import parse_duration
from govsync.api.catalog import readable_kinds
from govsync.commands import read_snapshot
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.envvars import DEFAULT_STATE, UI_TOKEN
from govsync.envvars import LOG as LOG_ENV
from govsync.errors import (
    ConfigError,
    GovsyncError,
    ManifestError,
    MigrateError,
    Problem,
    StateError,
)
from govsync.manifests import load as load_manifests
from govsync.manifests.model import Context, ManifestSet
from govsync.manifests.parallel import forked_reader
from govsync.plan import blocked_advice
from govsync.project import Given, Selection, select
from govsync.redact import url as safe_url
from govsync.render.graph import change_graph, dependency_graph
from govsync.render.graph import render as render_graph
from govsync.rules import check_manifests
from govsync.settings import Settings, resolve
from govsync.sshsig import PassphraseNeeded

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


class GovsyncGroup(click.Group):
    """Turns every GovsyncError into its message and exit 1, never a traceback.

    The group's own flags (-v, -q, --no-color) are accepted after the
    subcommand too (``govsync plan -v``), as every other option is."""

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


def given(ctx: click.Context, param: str, value: str | None, flag: str, variable: str) -> Given:
    """A global option's value and where it came from (option, environment, default)."""
    source = ctx.get_parameter_source(param)
    where = ("option" if source == click.core.ParameterSource.COMMANDLINE
             else "environment" if source == click.core.ParameterSource.ENVIRONMENT
             else "default")
    return Given(value, where, flag, variable)


def global_options(func: F) -> F:
    """--endpoint, --state, --workspace... and the project's environment, collapsed into
    one ``settings`` argument.  Precedence, highest first: the option, its environment
    variable, the environment's entry in govsync.yaml, its top level, the default."""

    @click.option("--endpoint", envvar=envvars.ENDPOINT, show_envvar=True, metavar="URL",
                  help="API base URL, or `local` for the embedded reference server. The key "
                       f"comes from {API_KEY_ENV}.")
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

        settings = resolve(
            selection,
            endpoint=given(ctx, "endpoint", endpoint, "--endpoint", envvars.ENDPOINT),
            state=given(ctx, "state_url", state_url, "--state", envvars.STATE),
            workspace=given(ctx, "workspace", workspace, "--workspace", envvars.WORKSPACE),
            api_key=os.environ.get(API_KEY_ENV) or None,
            insecure_http=insecure_http,
            local_seed=local_seed,
        )
        return func(*args, settings=settings, **kwargs)

    return wrapper  # type: ignore[return-value]


paths_argument = click.argument("paths", nargs=-1, type=click.Path())


def target_option(func: F) -> F:
    """--target PATTERN (repeatable), stored on ``settings``."""

    @click.option("--target", "targets", multiple=True, metavar="PATTERN",
                  help="Only this address (or glob, e.g. 'Hook/*') and what it depends on; "
                       "repeatable. The summary counts what was left out.")
    @functools.wraps(func)
    def wrapper(*args: Any, targets: tuple[str, ...], settings: Settings, **kwargs: Any) -> Any:
        return func(*args, settings=dataclasses.replace(settings, targets=targets), **kwargs)

    return wrapper  # type: ignore[return-value]


def _environments(names: list[str]) -> str:
    if len(names) == 1:
        return f"environment {names[0]}"
    return "environments " + ", ".join(names)


def load(paths: tuple[str, ...] | list[str], selection: Selection | None = None, *,
         short: bool = False) -> ManifestSet:
    """Load manifests as a short-lived process should.

    The cyclic garbage collector is paused while loading and the loaded
    objects are frozen out of it afterwards: loading makes a million small
    acyclic objects, which the collector would otherwise scan again and again
    for nothing (a fifth of the time at 10,000 documents).  With ``short``
    (plan, validate, drift: the command ends soon after) it stays paused: the
    state's snapshot and the plan are as acyclic, and at 100,000 objects the
    collector would spend 0.25 s rescanning them.  Large sets are read in two
    processes (fork).  These are process-wide acts, so they are the entry
    point's choice, not the library's.
    """


    selection = selection or Selection()
    context = Context(selection.variables(), selection.name)

    enabled = gc.isenabled()
    gc.disable()
    try:
        manifests = load_manifests(selection.paths(paths), read=forked_reader, context=context)
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
    if os.environ.get(LOG_ENV) or "govsync.logs" in sys.modules:
        # Without GOVSYNC_LOG, logging is configured only to undo an earlier
        # invocation's set-up in this process (logging costs start-up).

        logs.configure(os.environ.get(LOG_ENV), hidden=[os.environ.get(API_KEY_ENV, "")])
    ctx.obj = Output(verbose, quiet, no_color)


@cli.command()
@paths_argument
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: {formatVersion, valid, errors: [{file, line, column, message}]}.")
def validate(paths: tuple[str, ...], selection: Selection, fmt: str) -> None:
    """Check manifests offline: syntax, fields, references, cycles.

    Every error is printed as FILE:LINE:COL: message, all of them at once.
    Exit 0 when valid, 1 when not. In a project with environments and no
    --env, every environment is checked and each error names its own.

    \b
    Example:
      govsync validate manifests/
      govsync validate --env prod
      govsync validate manifests/ --format json | jq '.errors[]'
    """

    selections = selection.each_environment()
    found: dict[Problem, list[str]] = {}
    for each in selections:
        try:
            manifests = load(paths, each, short=True)
            warnings = _rules(manifests, each)
        except ManifestError as exc:
            for problem in exc.problems:
                found.setdefault(problem, []).append(each.name or "")
            continue
        except GovsyncError as exc:
            if fmt != "json":
                raise
            found.setdefault(Problem("", 0, 0, str(exc)), []).append(each.name or "")
            continue
        n, files = len(manifests.objects), len(manifests.files)
        where = f" (environment {each.name})" if each.name else ""
        if fmt != "json" and not out().quiet:
            # The result, on stdout (errors and warnings go to stderr).
            click.echo(f"{n} object{'s' if n != 1 else ''} in {files} file"
                       f"{'s' if files != 1 else ''}{where}: valid.")
        for warning in warnings:
            click.echo(str(warning), err=True)
    if found and len(selections) > 1:  # say which environment each error belongs to
        found = {Problem(p.file, p.line, p.col, f"({_environments(envs)}) {p.message}"): envs
                 for p, envs in found.items()}
    if fmt == "json":
        from govsync.render.documents import dumps, validate_public

        click.echo(dumps(validate_public(found)), nl=False)
        if found:
            sys.exit(1)
        return
    if found:
        raise ManifestError(list(found))


def _rules(manifests: ManifestSet, selection: Selection) -> list[Any]:
    """The project's rules on loaded manifests: their warnings (ManifestError for errors)."""
    if not selection.rules:
        return []  # (without importing the rules engine)

    return check_manifests(manifests, selection.rules, selection.name).warnings


@cli.command()
@paths_argument
@global_options
@target_option
@click.option("--out", "out_file", type=click.Path(dir_okay=False),
              help="Save the plan for `govsync apply FILE`.")
@click.option("--format", "fmt", type=click.Choice([*FORMATS.choices, "html"]), default="text",
              show_default=True,
              help="html: the plan page as one self-contained file (a CI artifact).")
@click.option("--without-secrets", is_flag=True,
              help="Do not read secrets' values (a pull request's plan: its jobs should not "
                   "hold them). Secrets show as (sensitive) and a changed value is not seen; "
                   "a saved plan is for review only (apply --reviewed plans again with them).")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 0 when there are no changes, 2 when there are, 1 on error or blocked.")
def plan(paths: tuple[str, ...], settings: Settings, out_file: str | None, fmt: str,
         without_secrets: bool, detailed_exitcode: bool) -> None:
    """Show what apply would change: create, update, no-op, blocked, orphan, uncertain.

    Reads the state without locking it and sends no write to the API. With an
    endpoint, checks that policy owner groups exist (ListGroups).

    \b
    Example:
      govsync plan manifests/ --out plan.json
      govsync plan manifests/ --format markdown > comment.md
      govsync plan manifests/ --format html > plan.html
    """

    if out_file and not os.path.isdir(os.path.dirname(os.path.abspath(out_file))):
        # Before the plan, which may make the workspace for the file: nothing is left.
        raise ConfigError(f"cannot write the plan to {out_file}: its folder does not exist")
    manifests = load(paths, settings.selection, short=True)
    result = commands.plan(manifests, settings, saving=bool(out_file),
                           read_secrets=not without_secrets)
    o = out()
    if fmt == "json":
        for chunk in render.plan_json_chunks(result):
            click.echo(chunk, nl=False)
    elif fmt == "markdown":
        click.echo(render.plan_markdown(result), nl=False)
    elif fmt == "html":
        from govsync.ui import plan_file

        click.echo(plan_file(result, settings.selection, manifests), nl=False)
    else:
        click.echo(render.plan_text(result, color=o.color, verbose=o.verbose > 0), nl=False, color=o.color)

    blocked = len(result.blocked())
    why = (f"{blocked} blocked change(s): the API cannot make them, so apply will refuse "
           f"this plan; {blocked_advice(result.blocked())} and plan again.")
    if out_file:
        review_only = commands.write_plan(result, settings, out_file, manifests)
        env = f" --env {settings.selection.name}" if settings.selection.name else ""
        if blocked:
            o.info(f"Saved the plan to {out_file}, but it cannot be applied: {why}")
        elif not review_only:
            o.info(f"Saved the plan to {out_file}: apply it with "
                   f"`govsync apply{env} {out_file}`.")
        else:
            o.info(f"Saved the plan to {out_file} for review only ({review_only}): apply it with "
                   f"`govsync apply{env} --reviewed {out_file}`, which plans again with the "
                   "applying credentials and applies only the same changes.")
    elif blocked:
        o.info(why[0].upper() + why[1:])
    if blocked:
        sys.exit(1)
    if detailed_exitcode and result.has_changes():
        sys.exit(2)


def where(settings: Settings) -> str:
    """What a command acts on: environment, workspace, endpoint and state (masked)."""

    env = settings.selection.name
    return (f"environment {env}, " if env else "") + (
        f"workspace {settings.workspace!r}, endpoint "
        f"{safe_url(settings.endpoint) if settings.endpoint else '(none)'}, state "
        f"{safe_url(settings.state)}")


def prompt(settings: Settings) -> str:
    """The confirmation question, naming what it will change (contract section 5)."""
    return f"Apply these changes to {where(settings)}? Only 'yes' will be accepted"


def confirmed(prompt: str) -> bool:
    """Ask for `yes`: at a terminal, or as one line of standard input (``echo yes |``),
    as Terraform does.  End of input or any other answer cancels (GovsyncError)."""
    stdin = sys.stdin
    if stdin.isatty():
        answer = str(click.prompt(prompt, default="", show_default=False))
    else:
        click.echo(f"{prompt}: ", nl=False, err=True)
        line = stdin.readline()
        if not line:
            click.echo("", err=True)
            raise GovsyncError("apply cancelled: standard input ended before an answer; "
                               "nothing was changed (pipe `yes`, or pass --auto-approve)")
        answer = line
        click.echo(answer.strip(), err=True)
    if answer.strip() != "yes":
        said = f"the answer was {answer.strip()[:40]!r}" if answer.strip() else "no answer"
        raise GovsyncError(f"apply cancelled: {said}, and only 'yes' applies; "
                           "nothing was changed")
    return True


@cli.command()
@paths_argument
@global_options
@target_option
@click.option("--auto-approve", is_flag=True,
              help="Apply without asking for `yes` (otherwise asked at the terminal, or "
                   "read as one line of standard input: `echo yes | govsync apply ...`).")
@click.option("--parallelism", default=32, show_default=True, type=click.IntRange(1, 256),
              help="Requests in flight at most (halved automatically on 429/503; "
                   "BENCHMARKS.md shows why 32).")
@click.option("--forget-orphans", is_flag=True,
              help="Drop orphans from state (they stay on the server: the API cannot delete).")
@click.option("--lock-timeout", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for another apply on this workspace to finish.")
@click.option("--allow-endpoint-change", is_flag=True,
              help="Apply although the state was applied against another endpoint.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: one JSON line per finished change, then a summary line, and "
                   "nothing else on stdout (the plan goes to stderr). Needs --auto-approve "
                   "or a saved plan.")
@click.option("--reviewed", "reviewed_file", metavar="PLAN", type=click.Path(dir_okay=False),
              help="The plan a review showed (a pull request's `plan --out`): plan PATHS "
                   "again with these credentials and apply only if the changes are exactly "
                   "PLAN's (its approvals count); otherwise refuse and show the difference.")
def apply(paths: tuple[str, ...], settings: Settings, auto_approve: bool, parallelism: int,
          forget_orphans: bool, lock_timeout: float, allow_endpoint_change: bool,
          fmt: str, reviewed_file: str | None) -> None:
    """Apply the manifests (or a saved plan) through the API.

    With PATHS, plans first and shows the plan; with one saved plan FILE (from
    `govsync plan --out`), applies exactly that plan, refused if the state
    changed since. Every success is recorded in state at once.

    \b
    Example:
      govsync apply manifests/ --endpoint local --auto-approve
      govsync apply plan.json
      govsync apply --env prod --reviewed plan.json     # CI, on merge
      govsync apply plan.json --format json | jq 'select(.type == "summary")'
    """

    o = out()

    # A saved plan was reviewed when it was made (`govsync plan --out`): apply
    # it without asking again, as `terraform apply PLANFILE` does.
    saved_plan = planfile.is_plan_file(list(paths))
    if saved_plan and reviewed_file:
        raise click.UsageError("--reviewed PLAN plans PATHS again: give manifest paths (or "
                               "none, with a project file), not a saved plan")
    reviewed = planfile.read(reviewed_file) if reviewed_file else None
    if fmt == "json":
        if not (auto_approve or saved_plan or reviewed):
            raise click.UsageError("--format json cannot ask for confirmation: pass "
                                   "--auto-approve, or apply a saved plan (govsync plan --out)")
        return _apply_json(paths, settings, saved_plan, parallelism=parallelism,
                           forget_orphans=forget_orphans, lock_timeout=lock_timeout,
                           allow_endpoint_change=allow_endpoint_change, reviewed=reviewed)
    source = planfile.read(paths[0]) if saved_plan else load(paths, settings.selection)

    def confirm(the_plan: Any) -> bool:
        o.info(f"Changing {where(settings)}.")
        click.echo(render.plan_text(the_plan, color=o.color), nl=False, color=o.color)
        if auto_approve or saved_plan or reviewed:
            return True
        return confirmed(prompt(settings))

    from govsync.apply import DONE
    from govsync.render.progress import LineReporter, ProgressReporter

    reporter = (ProgressReporter(o.color, o.quiet) if o.color and sys.stderr.isatty()
                else LineReporter(o.color, o.quiet))
    the_plan, result = commands.apply(
        source, settings, reviewed=reviewed, confirm=confirm, parallelism=parallelism,
        forget_orphans=forget_orphans, lock_timeout=lock_timeout, reporter=reporter,
        allow_endpoint_change=allow_endpoint_change,
    )
    if the_plan.governance is not None:
        click.echo(f"Recorded the governance of workspace {settings.workspace!r}.")
    if not result.outcomes:
        if the_plan.has_changes():
            # Only orphans or uncertain entries: nothing to send, but they are
            # reported (contract section 2), never hidden behind "No changes".
            click.echo(render.plan_text(the_plan, color=o.color), nl=False, color=o.color)
            click.echo("Nothing to apply.")
        else:
            click.echo("No changes. Nothing to apply.")
        return
    s = result.summary()
    click.echo(
        f"Apply: {s['applied']} applied, {s['failed']} failed, {s['skipped']} skipped, "
        f"{s['uncertain']} uncertain, {s['forgotten']} forgotten "
        f"({result.requests} requests in {result.seconds:.2f} s)."
    )
    if not result.ok:
        for oc in result.outcomes:
            if oc.status not in DONE:
                click.echo(f"  {oc.address}: {oc.status}: {oc.code + ' ' if oc.code else ''}{oc.error}")
        if result.stopped:
            click.echo(f"Error: apply stopped: {result.stopped}.", err=True)
        click.echo("What succeeded is recorded in state; fix the failures and apply again.", err=True)
        sys.exit(1)


def _apply_json(paths: tuple[str, ...], settings: Settings, saved_plan: bool,
                **options: Any) -> None:
    """``apply --format json``: JSON lines on stdout, the plan and messages on stderr.

    The summary line comes last whatever happens, an error before anything
    was sent included (its message is the summary's ``stopped``)."""
    from govsync.apply import ApplyResult
    from govsync.render.progress import JsonReporter

    o = out()
    reporter = JsonReporter()

    def show(the_plan: Any) -> bool:
        if not o.quiet:
            click.echo(render.plan_text(the_plan), nl=False, err=True)
        return True

    try:
        source = planfile.read(paths[0]) if saved_plan else load(paths, settings.selection)
        _plan, result = commands.apply(source, settings, confirm=show, reporter=reporter,
                                       **options)
    except GovsyncError as exc:
        problems = getattr(exc, "problems", None)
        why = (f"{len(problems)} error(s) in the manifests, the first: {problems[0]}"
               if problems else str(exc) or type(exc).__name__)
        reporter.summary(ApplyResult(), stopped=why)
        raise
    reporter.summary(result)
    if result.stopped:
        click.echo(f"Error: apply stopped: {result.stopped}.", err=True)
    if not result.ok:
        sys.exit(1)


@cli.command()
@paths_argument
@global_options
@target_option
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--without-secrets", is_flag=True,
              help="Do not read secrets' values (a job with read-only credentials): a "
                   "secret whose value changed is not seen.")
def drift(paths: tuple[str, ...], settings: Settings, fmt: str, without_secrets: bool) -> None:
    """Check that the API, the state and the manifests agree (for a scheduled job).

    Reports unapplied changes, orphans, uncertain entries, and live checks
    where the API has a read operation (policy owner groups, via ListGroups).
    Exit 0 in sync, 2 drift, 1 error.

    \b
    Example:
      govsync drift manifests/ --endpoint https://api.example.com --format markdown
    """

    report = commands.drift(load(paths, settings.selection, short=True), settings,
                            read_secrets=not without_secrets)
    o = out()
    if fmt == "json":
        click.echo(render.drift_json(report), nl=False)
    elif fmt == "markdown":
        click.echo(render.drift_markdown(report), nl=False)
    else:
        click.echo(render.drift_text(report, color=o.color), nl=False, color=o.color)
    if not report.in_sync:
        sys.exit(2)


@cli.command("environments")
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: one name per line, in the project file's order; json: each with "
                   "its workspace, endpoint, state (credentials masked), paths and approvals.")
def environments_command(selection: Selection, fmt: str) -> None:
    """List the environments of the project file (nothing when it has none).

    Each is resolved as a command run with --env NAME would resolve it (the
    environment variables included), so a CI job can loop over them and check
    their settings first.

    \b
    Example:
      for env in $(govsync environments); do govsync plan --env "$env"; done
      govsync environments --format json
    """
    from govsync.render.documents import environments_public

    project = selection.project
    rows = []
    approvals = project.approvals if project is not None else None
    for env in (project.environments.values() if project is not None else ()):
        chosen = Selection(project, env, selection.overrides)
        given = {key: Given(os.environ.get(variable) or None,
                            "environment" if os.environ.get(variable) else "default",
                            flag, variable)
                 for key, flag, variable in (("endpoint", "--endpoint", envvars.ENDPOINT),
                                             ("state", "--state", envvars.STATE),
                                             ("workspace", "--workspace", envvars.WORKSPACE))}
        rows.append({
            "name": env.name,
            "workspace": chosen.choose("workspace", given["workspace"]),
            "endpoint": chosen.choose("endpoint", given["endpoint"]),
            "state": chosen.choose("state", given["state"]),
            "paths": list(chosen.paths(())),
            "approvals": (approvals.required if approvals is not None and (
                approvals.environments is None or env.name in approvals.environments) else 0),
        })
    if fmt == "json":
        _echo_json(environments_public(project.file if project else None, rows))
        return
    for row in rows:
        click.echo(row["name"])


@cli.command("graph")
@paths_argument
@global_options
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid",
              show_default=True, help="Mermaid flowchart (renders in GitHub Markdown) or "
                                      "Graphviz DOT.")
@click.option("--plan", "of_plan", is_flag=True,
              help="Only what the plan changes, coloured by action (create green, update "
                   "yellow, blocked red, orphan magenta, uncertain cyan); reads the state "
                   "like `govsync plan`.")
def graph_command(paths: tuple[str, ...], settings: Settings, fmt: str, of_plan: bool) -> None:
    """Print the dependency graph of the manifests (an edge A --> B: A comes first).

    Edges come from references (spaceRef...) and metadata.dependsOn. With
    --plan, only the changes, linked when one depends on another (directly
    or through unchanged objects).

    \b
    Example:
      govsync graph manifests/ > graph.mmd
      govsync graph manifests/ --format dot | dot -Tsvg > graph.svg
      govsync graph manifests/ --plan --endpoint local
    """

    manifests = load(paths, settings.selection)
    if of_plan:

        the_graph = change_graph(commands.plan(manifests, settings, read_secrets=False),
                                 manifests.objects)
        if not the_graph.nodes:
            out().info("No changes: the plan's graph is empty (drop --plan for the whole "
                       "dependency graph).")
    else:
        the_graph = dependency_graph(manifests.objects)
    click.echo(render_graph(the_graph, fmt), nl=False)


@cli.group()
def state() -> None:
    """Inspect and repair the recorded state of a workspace.

    \b
    Example:
      govsync state list
      govsync state resolve Hook/risk --id hook-123
    """


def _echo_json(data: Any) -> None:

    click.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


@state.command("list")
@global_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_list(settings: Settings, fmt: str) -> None:
    """List the addresses in state with their ids and statuses.

    \b
    Example:
      govsync state list --workspace prod
    """

    snap = read_snapshot(settings)
    if fmt == "json":
        from govsync.render.documents import state_list_public

        _echo_json(state_list_public(snap))
        return
    for e in snap.entries.values():
        click.echo(f"{e.address}\t{e.id or '-'}\t{e.status}")
    if not snap.lineage:
        out().info(f"No state yet for workspace {snap.workspace!r} ({settings.state} does not "
                   "exist; the first apply creates it).")
        return
    out().info(f"{len(snap.entries)} object(s) in workspace {snap.workspace!r} "
               f"(lineage {snap.lineage}, serial {snap.serial}).")


@state.command("show")
@click.argument("address")
@global_options
def state_show(address: str, settings: Settings) -> None:
    """Show one entry: id, status, the spec last applied (secrets as fingerprints), the API's answer.

    \b
    Example:
      govsync state show Hook/risk_score
    """

    _echo_json(commands.state_entry(settings, address).as_dict())


@state.command("forget")
@click.argument("addresses", metavar="ADDRESS...", nargs=-1, required=True)
@global_options
def state_forget(addresses: tuple[str, ...], settings: Settings) -> None:
    """Drop entries from state (the objects stay on the server).

    All of them or none: an address not in state changes nothing.

    \b
    Example:
      govsync state forget Space/old-analytics Hook/old-risk
    """

    for entry in commands.state_forget(settings, list(addresses)):
        click.echo(f"Forgot {entry.address} (id {entry.id}); it stays on the server.")


@state.command("import")
@click.argument("address")
@click.argument("object_id", metavar="ID")
@click.argument("paths", nargs=-1, type=click.Path())
@global_options
def state_import(address: str, object_id: str, paths: tuple[str, ...], settings: Settings) -> None:
    """Adopt an object that already exists on the server under ID.

    The manifest's current spec (found under PATHS, default: the project's
    paths for the environment, else .) becomes its baseline: the next plan shows no change for it. The id is recorded as
    given: the API has no operation that reads the managed kinds, so it
    cannot be verified; check it yourself.

    \b
    Example:
      govsync state import Space/analytics space-0a1b2c manifests/
    """

    default = () if settings.selection.project is not None else (".",)
    entry = commands.state_import(settings, address, object_id,
                                  load(paths or default, settings.selection))
    why = (f"the API cannot read a {entry.kind}" if entry.kind not in readable_kinds()
           else f"govsync does not read a {entry.kind} on import")
    click.echo(f"Recorded {entry.address} as {entry.id} without verification: {why}, "
               "check the id yourself.")


@state.command("mv")
@click.argument("old", metavar="FROM")
@click.argument("new", metavar="TO")
@global_options
def state_mv(old: str, new: str, settings: Settings) -> None:
    """Re-address an entry (the same as a `kind: Moved` document), without calling the API.

    Both addresses are of one kind; for kinds whose API name is metadata.name
    the name cannot change (the API cannot rename).

    \b
    Example:
      govsync state mv DataLabel/ssn DataLabel/national-id
    """

    entry = commands.state_move(settings, old, new)
    click.echo(f"Moved {old} to {new} (id {entry.id}); nothing was sent.")


@state.command("resolve")
@click.argument("addresses", metavar="ADDRESS...", nargs=-1, required=True)
@click.option("--id", "object_id", help="The create succeeded: the object's id on the server.")
@click.option("--absent", is_flag=True, help="The create did not happen: plan will create it again.")
@global_options
def state_resolve(addresses: tuple[str, ...], object_id: str | None, absent: bool,
                  settings: Settings) -> None:
    """Settle uncertain creates (sent, outcome unknown): one that exists (--id), or
    any number that do not (--absent). Refused while an apply runs.

    \b
    Example:
      govsync state resolve Hook/risk_score --id hook-123
      govsync state resolve Hook/risk_score Hook/fraud_score --absent
    """

    if bool(object_id) == absent:
        raise click.UsageError("give exactly one of --id ID and --absent")
    for entry in commands.state_resolve(settings, list(addresses), None if absent else object_id):
        click.echo(f"Resolved {entry.address}: " + (
            "absent; the next apply creates it." if absent else f"exists as {object_id}."))


@state.command("export")
@global_options
def state_export(settings: Settings) -> None:
    """Print the workspace's state as JSON (backup; moving between SQLite and PostgreSQL).

    \b
    Example:
      govsync state export > backup.json
      govsync state import-all backup.json --state postgresql://ci@db/govsync
    """

    _echo_json(commands.state_export(settings))


@state.command("import-all")
@click.argument("file", type=click.File("r"))
@global_options
def state_import_all(file: Any, settings: Settings) -> None:
    """Replace the workspace's state with an export.

    \b
    Example:
      govsync state import-all backup.json --workspace prod
    """


    try:
        data = json.load(file)
    except ValueError as exc:
        raise StateError(f"{file.name} is not JSON: {exc}") from exc
    serial = commands.state_import_all(settings, data)
    click.echo(f"Imported {len(data.get('entries', []))} entries (serial {serial}).")


@state.command("readonly-role")
@click.argument("role", metavar="ROLE")
@global_options
def state_readonly_role(role: str, settings: Settings) -> None:
    """Print the SQL that makes ROLE the read-only role of a PostgreSQL state.

    The role may then plan, drift, show and list (what pull-request jobs do),
    and nothing else: no write, and never the key that authenticates saved
    plans, so it cannot forge one. Run it with the credentials that own the
    state (it makes the tables first if there are none yet); pipe the output to
    psql as that owner. Create the role itself first (CREATE ROLE ... LOGIN).

    \b
    Example:
      govsync state readonly-role govsync_reader --state "$GOVSYNC_STATE" | psql "$GOVSYNC_STATE"
    """

    for statement in commands.state_readonly_role(settings, role):
        click.echo(statement)


@state.command("unlock")
@global_options
def state_unlock(settings: Settings) -> None:
    """Clear a workspace lock left behind by an apply that is gone.

    \b
    Example:
      govsync state unlock --workspace prod
    """

    holder, free = commands.state_unlock(settings)
    if not free:
        raise GovsyncError(
            f"the workspace is still locked by a running process ({holder or 'unknown holder'}): "
            "the lock ends when that process exits; stop it (on PostgreSQL an administrator "
            "can end its session with pg_terminate_backend)")
    click.echo(f"Unlocked (was held by {holder})." if holder else "The workspace was not locked.")


@state.command("history")
@global_options
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_history(settings: Settings, limit: int, fmt: str) -> None:
    """Show past applies: who, when, what changed, outcome.

    \b
    Example:
      govsync state history --limit 5
    """

    records = commands.state_history(settings, limit)
    if fmt == "json":
        from govsync.render.documents import state_history_public

        _echo_json(state_history_public(settings.workspace, records))
        return
    for r in records:
        s = r.get("summary", {})
        click.echo(f"{r.get('at')}  {r.get('user')}@{r.get('host')}  "
                   f"{'ok' if r.get('ok') else 'FAILED'}  "
                   + ", ".join(f"{v} {k}" for k, v in s.items() if v))


@cli.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@global_options
@click.option("--format", "fmt", type=click.Choice([*FORMATS.choices, "html"]), default="text",
              show_default=True,
              help="html: the plan page with its approvals, as one self-contained file.")
@click.option("--digest", is_flag=True,
              help="Print only the line approvers sign (its review digest), for "
                   "`ssh-keygen -Y sign -n govsync-plan`.")
def show_command(file: str, settings: Settings, fmt: str, digest: bool) -> None:
    """Show a saved plan (from `govsync plan --out`) without applying it.

    Shows every request it would send, field by field, whether its
    authentication verifies against its workspace's state (when the state is
    reachable), the review digest approvers sign, and the approvals in
    FILE.sig. --format json prints the same document as `plan --format json`.

    \b
    Example:
      govsync show plan.json
      govsync show plan.json --format html > plan.html
      govsync show plan.json --digest | ssh-keygen -Y sign -n govsync-plan -f ~/.ssh/id_ed25519
    """
    from govsync.render.documents import show_text

    saved = planfile.read(file)
    if digest:
        click.echo(planfile.review_message(saved.review_digest).decode(), nl=False)
        return
    o = out()
    if fmt == "json":
        click.echo(render.plan_json(saved.plan), nl=False)
        return
    if fmt == "markdown":
        click.echo(render.plan_markdown(saved.plan, title="govsync saved plan"), nl=False)
        return
    verification, record = commands.inspect_saved(saved, settings)
    if fmt == "html":
        from govsync.ui import saved_plan_file

        signers, required, source = _signers(record, settings, saved.plan.workspace)
        click.echo(saved_plan_file(saved, verification, signers, required, source), nl=False)
        return
    click.echo(show_text(saved, verification=verification, color=o.color,
                         verbose=o.verbose > 0), nl=False, color=o.color)
    signers, required, source = _signers(record, settings, saved.plan.workspace)
    for line in approvals.describe(saved, signers, required, source):
        click.echo(line)


def _signers(record: Any, settings: Settings, workspace: str
             ) -> tuple[list[Any] | None, int, str]:
    """The allowed signers to check approvals against: those the workspace records,
    else the project's (None: neither has any)."""

    if record is not None and record.required:
        return (record.allowed(workspace), record.required,
                f"recorded with workspace {workspace!r}")
    project = settings.selection.project
    if project is not None and project.approvals is not None:
        return (approvals.read_allowed_signers(project.approvals), project.approvals.required,
                project.approvals.allowed_signers)
    return None, 0, ""


@cli.command("ui")
@global_options
@click.option("--listen", "listen_at", default="127.0.0.1:8421", show_default=True,
              metavar="HOST:PORT", help="Where to serve the dashboard (beyond loopback only "
                                        "with GOVSYNC_UI_TOKEN set).")
def ui_command(settings: Settings, listen_at: str) -> None:
    """Serve the dashboard, read-only: every environment's status, plan and history.

    Every environment of the project (or the one --env names) is planned
    against its recorded state without reading secrets or calling the API,
    and shown with its pending changes field by field, blocked changes and
    their reasons, rule results, uncertain entries with the command that
    settles them, history and audit, and the dependency graph. Nothing is
    ever written, and no page shows a secret (--endpoint is not used). With GOVSYNC_UI_TOKEN set,
    every request must carry it (a browser: open any page once with
    ?token=TOKEN).

    \b
    Example:
      govsync ui                          # http://127.0.0.1:8421/
      GOVSYNC_UI_TOKEN=... govsync ui --listen 0.0.0.0:8421
    """
    from govsync.ui.app import serve as serve_ui

    serve_ui(settings, listen_at, os.environ.get(UI_TOKEN) or None)


@cli.group("agent", invoke_without_command=True)
@click.option("--project", "project_file", envvar=envvars.PROJECT, show_envvar=True,
              metavar="FILE", help="The project file (with --repo: its path in the checkout; "
                                   "default govsync.yaml).")
@click.option("--repo", metavar="PATH|URL", help="The git repository to keep a checkout of "
                                                 "(default: the project where it is, no git).")
@click.option("--branch", metavar="NAME", help="Its branch (default: the repository's).")
@click.option("--checkout", "checkout_dir", default=os.path.join(".govsync", "agent", "checkout"),
              show_default=True, metavar="DIR", help="Where the checkout of --repo is kept.")
@click.option("--listen", "listen_at", default="127.0.0.1:8420", show_default=True,
              metavar="HOST:PORT", help="Where to serve /healthz, /readyz, /metrics, the API, "
                                        "the webhook and the dashboard.")
@click.option("--interval", metavar="DURATION", help="Every environment's interval (30s, 5m, "
                                                     "1h), over the project's agent.interval "
                                                     "(default 5m).")
@click.option("--once", is_flag=True, help="One cycle of every environment, then exit: 0 all "
                                           "Synced, 2 some not, 1 an error.")
@click.option("--env", "env_names", multiple=True, metavar="NAME",
              help="Only this environment (repeatable; default: every one).")
@click.option("--endpoint", envvar=envvars.ENDPOINT, show_envvar=True, metavar="URL",
              help="API base URL, or `local`, where the project's environments name none.")
@click.option("--state", "state_url", envvar=envvars.STATE, show_envvar=True, metavar="URL",
              help="State store, where the project's environments name none.")
@click.option("--insecure-http", is_flag=True, envvar=envvars.INSECURE_HTTP, show_envvar=True,
              help="Allow a plain http:// endpoint on a non-loopback host.")
@click.pass_context
def agent_command(ctx: click.Context, project_file: str | None, repo: str | None,
                  branch: str | None, checkout_dir: str, listen_at: str, interval: str | None,
                  once: bool, env_names: tuple[str, ...], endpoint: str | None,
                  state_url: str | None, insecure_http: bool) -> None:
    """Reconcile continuously: plan every environment each interval, apply where
    its agent.autoApply allows, keep each one's status, alert, serve metrics.

    Keeps a checkout of --repo at --branch current; each interval, and at once
    on a verified push (POST /hooks/git, X-Hub-Signature-256 checked with
    GOVSYNC_AGENT_WEBHOOK_SECRET), it plans each environment of the project
    and records its status (Synced, OutOfSync, Blocked, Uncertain, Locked,
    Paused, Error) in the workspace's history. An apply passes every check a
    person's does; a held lock, a pause or a freeze window only plans. Several
    agents may share one PostgreSQL state: one acts per environment, another
    takes over when it ends. SIGTERM finishes the calls in flight, records
    them and exits 0. The API and dashboard need GOVSYNC_UI_TOKEN beyond
    loopback; GOVSYNC_AGENT_URL is the address links in notifications use.

    \b
    Example:
      govsync agent --repo https://git.example.com/gov.git --branch main
      govsync agent --once --env staging
      govsync agent pause prod --reason "incident 4711"
    """
    if ctx.invoked_subcommand is not None:
        return
    from govsync.agent import Agent, Options, Served, create_app
    from govsync.ui.app import loopback, parse_listen

    try:
        every = parse_duration(interval) if interval is not None else None
    except ValueError as exc:
        raise ConfigError(f"--interval: {exc}") from None
    host, port = parse_listen(listen_at)
    token = os.environ.get(UI_TOKEN) or None
    if token is None and not loopback(host) and not once:
        raise ConfigError(f"--listen {listen_at} is reachable beyond this machine: set "
                          f"{UI_TOKEN} to a token that the API and dashboard require")
    options = Options(
        project=project_file, repo=repo, branch=branch, checkout=checkout_dir, interval=every,
        environments=env_names,
        endpoint=given(ctx, "endpoint", endpoint, "--endpoint", envvars.ENDPOINT),
        state=given(ctx, "state_url", state_url, "--state", envvars.STATE),
        workspace=Given(os.environ.get(envvars.WORKSPACE) or None,
                        "environment" if os.environ.get(envvars.WORKSPACE) else "default",
                        "--workspace", envvars.WORKSPACE),
        api_key=os.environ.get(API_KEY_ENV) or None, insecure_http=insecure_http,
        local_seed=os.environ.get(envvars.LOCAL_SEED) or None,
        url=os.environ.get(envvars.AGENT_URL) or None)
    agent = Agent(options, os.environ)
    # The entry point's: on SIGTERM (and Ctrl-C) the agent finishes what is in flight.
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    signal.signal(signal.SIGINT, lambda *_: agent.stop())
    served = None
    if not once:
        app = create_app(agent, token=token,
                         webhook_secret=os.environ.get(envvars.AGENT_WEBHOOK_SECRET) or None)
        served = Served(app, host, port)
        click.echo(f"govsync agent: listening on http://{listen_at.rsplit(':', 1)[0]}:"
                   f"{served.port}/", err=True)
    try:
        code = agent.run(once=once)
    finally:
        if served is not None:
            served.stop()
    if once:
        for item in agent.environments():
            click.echo(f"{item['name']}: {item['status']} ({item['reason']})")
    sys.exit(code)


def _environment_settings(environment: str) -> Settings:
    """The settings of a project environment named as an argument (as --env would)."""
    ctx = click.get_current_context()
    selection = select(ctx.params.get("project_file"), environment, [])
    return resolve(
        selection,
        endpoint=given(ctx, "endpoint", ctx.params.get("endpoint"), "--endpoint",
                       envvars.ENDPOINT),
        state=given(ctx, "state_url", ctx.params.get("state_url"), "--state", envvars.STATE),
        workspace=given(ctx, "workspace", ctx.params.get("workspace"), "--workspace",
                        envvars.WORKSPACE),
        api_key=None)


@agent_command.command("pause")
@global_options
@click.argument("environment", metavar="ENV")
@click.option("--reason", required=True, metavar="TEXT", help="Why (shown and kept).")
def agent_pause(settings: Settings, environment: str, reason: str) -> None:
    """Pause the agent's applies of an environment (it is still planned).

    Recorded in the environment's workspace: every agent sees it at its next
    cycle, and it stays until `govsync agent resume ENV`.

    \b
    Example:
      govsync agent pause prod --reason "incident 4711"
    """
    from govsync.agent import pause

    pause(_environment_settings(environment), reason)
    click.echo(f"paused {environment}: the agent plans it and applies nothing until "
               f"`govsync agent resume {environment}`")


@agent_command.command("resume")
@global_options
@click.argument("environment", metavar="ENV")
def agent_resume(settings: Settings, environment: str) -> None:
    """Resume the agent's applies of a paused environment.

    \b
    Example:
      govsync agent resume prod
    """
    from govsync.agent import resume

    lifted = resume(_environment_settings(environment))
    click.echo(f"resumed {environment}" if lifted is not None
               else f"{environment} was not paused")


@cli.command()
@click.option("--out", "out_dir", default="schemas", show_default=True, type=click.Path(file_okay=False),
              help="Directory for manifest.schema.json and openapi.json.")
@click.option("--check", is_flag=True, help="Exit 1 if the files there are not current.")
def schema(out_dir: str, check: bool) -> None:
    """Write the JSON Schema of manifests and the API's OpenAPI document.

    \b
    Example:
      govsync schema --out schemas/
    """
    from govsync.schema import write_schemas

    stale = write_schemas(out_dir, check=check)
    if check and stale:
        click.echo("Stale: " + ", ".join(stale) + " (run `govsync schema`)", err=True)
        sys.exit(1)
    out().info(f"Wrote the schemas to {out_dir}/" if not check else "Schemas are current.")


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=int, help="Port to listen on.")
@click.option("--db", default=":memory:", show_default=True, help="SQLite file, or :memory:.")
@click.option("--api-key", "api_keys", multiple=True, help="A key that may call every operation.")
@click.option("--viewer-key", "viewer_keys", multiple=True, help="A key that may call ListGroups only.")
@click.option("--seed", type=click.Path(exists=True, dir_okay=False), help="YAML of resources, groups, users and links to preload.")
@click.option("--latency-ms", default=0, type=click.IntRange(min=0), help="Delay every response.")
@click.option("--fault-rate", default=0.0, type=click.FloatRange(0.0, 1.0), help="Fraction of write calls that fail.")
@click.option("-v", "--verbose", count=True, help="Log every request (also: govsync -v serve).")
def serve(
    host: str,
    port: int,
    db: str,
    api_keys: tuple[str, ...],
    viewer_keys: tuple[str, ...],
    seed: str | None,
    latency_ms: int,
    fault_rate: float,
    verbose: int,
) -> None:
    """Run the reference implementation of the control API.

    Says where it listens on stderr once it does; with -v, one line per
    request (method, path, status, milliseconds).

    \b
    Example:
      govsync serve --port 8080 --db api.db --api-key dev-key --seed examples/server-seed.yaml
    """
    from govsync.server.serve import run

    run(
        host=host,
        port=port,
        db=db,
        api_keys=list(api_keys),
        viewer_keys=list(viewer_keys),
        seed=seed,
        latency_ms=latency_ms,
        fault_rate=fault_rate,
        verbose=verbose + out().verbose > 0,
    )


# -- guardrails and approvals ---------------------------------------------------------


@cli.command("approve")
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False))
@click.option("--key", "key_file", required=True, type=click.Path(dir_okay=False),
              help="Your SSH private key (ed25519, ecdsa or rsa), e.g. ~/.ssh/id_ed25519.")
@click.option("--yes", "assume_yes", is_flag=True,
              help="Sign without asking (at a terminal, approve asks after showing the plan).")
@project_options
def approve(plan_file: str, key_file: str, assume_yes: bool, selection: Selection) -> None:
    """Sign a saved plan: add your SSH signature to PLAN.sig.

    Shows what you are signing first: every change and every request the plan
    sends, and its review digest. The signature covers that digest (what the
    plan would send, to which workspace and environment), namespace
    govsync-plan, as `govsync show PLAN --digest | ssh-keygen -Y sign -n
    govsync-plan` makes it, so it also holds for the same plan made again at
    merge (`govsync apply --reviewed`). Apply counts the valid signatures of
    distinct people listed in the allowed signers its workspace records. An
    encrypted key asks for its passphrase (or reads GOVSYNC_KEY_PASSPHRASE).

    \b
    Example:
      govsync approve plan.json --key ~/.ssh/id_ed25519
    """
    from govsync.render import plan_text
    from govsync.render.documents import requests_text

    saved = planfile.read(plan_file)
    env = f", environment {saved.plan.environment}" if saved.plan.environment else ""
    click.echo(f"You are approving {plan_file}: workspace {saved.plan.workspace!r}{env}, "
               f"review digest sha256:{saved.review_digest}.", err=True)
    click.echo(plan_text(saved.plan) + requests_text(saved.plan), nl=False, err=True)
    if sys.stdin.isatty() and not assume_yes:
        answer = str(click.prompt("Sign this plan? Only 'yes' will be accepted", default="",
                                  show_default=False))
        if answer.strip() != "yes":
            raise GovsyncError("not signed: only 'yes' signs")
    allowed = selection.project.approvals if selection.project else None
    signers = approvals.read_allowed_signers(allowed) if allowed is not None else None
    source = allowed.allowed_signers if allowed is not None else ""
    secret = os.environ.get(envvars.KEY_PASSPHRASE)
    passphrase = secret.encode() if secret else None
    try:
        private = approvals.load_key(key_file, passphrase)
    except PassphraseNeeded as exc:
        if passphrase is not None or not sys.stdin.isatty():
            raise GovsyncError(f"{key_file}: the key is encrypted and the passphrase is "
                               f"missing or wrong ({exc}): set {envvars.KEY_PASSPHRASE} or run "
                               "on a terminal") from exc
        typed = click.prompt(f"Passphrase for {key_file}", hide_input=True, default="",
                             show_default=False)
        try:
            private = approvals.load_key(key_file, str(typed).encode())
        except PassphraseNeeded as again:
            raise GovsyncError(f"{key_file}: wrong passphrase") from again
    signed = approvals.approve(saved, private, signers, source)
    if signed.replaced:
        click.echo(f"Approved {plan_file} as {signed.who}: your earlier signature in "
                   f"{signed.path} was replaced by this one (one counts per signer).")
    else:
        click.echo(f"Approved {plan_file} as {signed.who}: signature added to {signed.path}.")


@cli.group()
def audit() -> None:
    """The apply history for access reviews.

    \b
    Example:
      govsync audit export --since 2025-01-01 --format csv > applies.csv
    """


@audit.command("export")
@global_options
@click.option("--since", metavar="DATE", help="Only applies from DATE on (2025-01-31, or an "
                                                "ISO time such as 2025-01-31T12:00:00Z).")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json",
              show_default=True, help="JSON lines (one apply a line) or CSV (one change a row).")
def audit_export(settings: Settings, since: str | None, fmt: str) -> None:
    """Write every apply of the workspace: when, who (user, host, CI actor), the plan's
    hash, its approvers, the manifests' git commit, and each change with its outcome.
    Never a secret.

    \b
    Example:
      govsync audit export --env prod > audit.jsonl
      govsync audit export --since 2025-01-01 --format csv
    """

    click.echo(commands.audit_export(settings, since=since, fmt=fmt), nl=False)


# -- moving in from another tool --------------------------------------------------------


@cli.group()
def migrate() -> None:
    """Move in from another tool, adopting the objects it made: nothing is created.

    \b
    Example:
      govsync migrate terraform formal.tfstate --out manifests/
      terraform state pull | govsync migrate terraform - --out manifests/
    """


@migrate.command("terraform")
@click.argument("tfstate", metavar="TFSTATE|-")
@click.option("--out", "out_dir", default="manifests", show_default=True, type=click.Path(),
              help="The folder to write: new, empty, or written by an earlier run over "
                   "the same state (then only what changed is rewritten).")
@click.option("--owner-group", metavar="NAME",
              help="The owner (a group's name) of each policy whose state has none "
                   "(provider schema version 2 no longer keeps it).")
def migrate_terraform_command(tfstate: str, out_dir: str, owner_group: str | None) -> None:
    """Write manifests for the formalco/formal resources of a Terraform state.

    Reads a Terraform state (format version 4, as `terraform state pull` prints
    it; `-` reads standard input) and writes to --out: a manifest for every
    resource that has a govsync kind, an Import document for each (its id:
    govsync's first apply adopts it and creates nothing), `{fromEnv: VAR}` in
    place of every secret (the variables to set are listed), MIGRATION.md (what
    was migrated, what stays in Terraform and why, what to do next) and
    terraform-state-rm.sh (the `terraform state rm` of exactly the migrated
    resources, to run after the first apply). Nothing is written unless all of
    it is valid; no value of the state is ever printed or written.

    \b
    Example:
      terraform state pull > formal.tfstate
      govsync migrate terraform formal.tfstate --out manifests/
      govsync plan manifests/          # every object an import, nothing created
    """


    # A migration makes millions of small acyclic objects (the state's JSON, the
    # manifests, their YAML read back): the cyclic collector would rescan them
    # for nothing (40% of the time at 10,000 resources).  The command ends soon
    # after, as plan and validate do (see ``load``).
    gc.disable()
    # Only this command needs it (13 ms of start-up): docs/architecture.md.
    from govsync.migrate import migrate_terraform

    try:
        done = migrate_terraform(tfstate, out_dir, owner_group=owner_group)
    except MigrateError as exc:
        for line in exc.problems:
            click.echo(f"Error: {line}", err=True)
        sys.exit(1)
    migrated, kept = done.conversion.migrated, done.conversion.kept
    report = os.path.join(out_dir, "MIGRATION.md")
    click.echo(f"Migrated {len(migrated)} of {len(migrated) + len(kept)} formalco/formal "
               f"resource instances into {out_dir} ({len(kept)} "
               f"{'stays' if len(kept) == 1 else 'stay'} in Terraform: see {report}).")
    if done.variables:
        click.echo(f"Set {len(done.variables)} secret variable"
                   f"{'s' if len(done.variables) != 1 else ''} before planning: "
                   + _some(done.variables, report))
    if done.ownerless:
        many = len(done.ownerless) != 1
        click.echo(f"{len(done.ownerless)} polic{'ies need' if many else 'y needs'} an owner "
                   "(groupName or userEmail): " + _some(done.ownerless, report))
    changed = len(done.written.changed) + len(done.written.removed)
    out().info(f"Wrote {changed} file{'s' if changed != 1 else ''} in {out_dir}." if changed
               else f"Nothing changed: {out_dir} is up to date.")
    out().info(f"Next: govsync validate {out_dir} && govsync plan {out_dir}")


def _some(names: list[str], where: str, shown: int = 10) -> str:
    """The first names of a list, and how many more ``where`` lists."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more (all in {where})" if more > 0 else "")


# -- the pull-request workflow: fmt, init, docs ------------------------------------


@cli.command("fmt")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--check", is_flag=True,
              help="Write nothing; list the files that would change and exit 1 if any.")
def fmt_command(paths: tuple[str, ...], check: bool) -> None:
    """Rewrite manifests in the canonical layout (every comment kept).

    Keys in the order apiVersion, kind, metadata (name, dependsOn), spec;
    two-space indentation with sequences indented under their key; documents
    separated by `---`. Only files that change are rewritten, and listed. A
    file with a YAML error is reported as FILE:LINE:COL, in the same words as
    `govsync validate`, and left alone (exit 1).

    \b
    Example:
      govsync fmt manifests/
      govsync fmt --check manifests/    # in CI or a pre-commit hook
    """

    from govsync.fmt import format_paths  # its command only: docs/architecture.md

    report = format_paths(list(paths), write=not check)
    for problem in report.problems:
        click.echo(str(problem), err=True)
    for name in report.changed:
        click.echo(name)
    n = len(report.changed)
    o = out()
    if check:
        if n:
            o.info(f"{n} file(s) not in the canonical layout: run `govsync fmt` on them.")
    else:
        o.info(f"Reformatted {n} of {len(report.files)} file(s).")
    if report.problems or (check and n):
        sys.exit(1)


@cli.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
@click.option("--ci", type=click.Choice(["github", "gitlab", "none"]), default="github",
              show_default=True, help="CI pipeline to add: GitHub Actions, GitLab CI, or none.")
@click.option("--install-spec", envvar=envvars.INSTALL_SPEC, show_envvar=True, metavar="SPEC",
              help="The pip requirement CI installs govsync with (requirements-govsync.txt); "
                   "default: how this govsync was installed.")
def init_command(directory: str, force: bool, ci: str, install_spec: str | None) -> None:
    """Scaffold a repository of manifests in DIRECTORY (default: here).

    Writes commented example manifests (one file per family of kinds, all
    valid), their JSON Schema for editors, a README, a .gitignore and the CI
    pipeline (plan on pull requests, apply the saved plan on merge, drift on a
    schedule). Refuses to overwrite existing files unless --force.

    \b
    Example:
      govsync init governance/
      govsync init --ci gitlab
    """

    from govsync.init import init, next_steps  # its command only: docs/architecture.md

    result = init(directory, force=force, ci=ci, install_spec=install_spec)
    for rel in result.created:
        click.echo(f"created {os.path.join(directory, rel)}")
    for rel in result.updated:
        click.echo(f"updated {os.path.join(directory, rel)}")
    click.echo("")
    click.echo(next_steps(result), nl=False)


@cli.command("docs")
@click.option("--out", "out_dir", default="docs", show_default=True,
              type=click.Path(file_okay=False),
              help="Directory for cli.md, kinds.md and json/*.schema.json.")
@click.option("--check", is_flag=True, help="Exit 1 if the files there are not current.")
def docs_command(out_dir: str, check: bool) -> None:
    """Write the reference docs: cli.md (every --help), kinds.md (every kind), and the
    JSON Schema of every JSON output in json/.

    \b
    Example:
      govsync docs --out docs/
      govsync docs --check
    """

    from govsync.docs import write_docs  # its command only: docs/architecture.md

    stale = write_docs(out_dir, cli, check=check)
    if check and stale:
        click.echo("Stale: " + ", ".join(stale) + " (run `govsync docs`)", err=True)
        sys.exit(1)
    out().info(f"Wrote the documentation to {out_dir}/" if not check else "Documentation is current.")


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
