"""What a command acts on, never silently something else (issue 34, finding 6).

- A project with environments and no ``--env`` is an error listing them (the
  project's top level is not an environment: a plan of workspace ``default``,
  offline, is not what anyone meant).
- Paths given with ``--env`` replace the environment's: said in one line, with
  the patches that are left out.
- ``apply PLAN`` and ``show PLAN`` take the environment, workspace and state the
  saved plan records; an ``--env``, ``--workspace`` or ``--state`` that names
  another is an error naming both.
- A new SQLite state made where no project file is: said in one line.
- A command that changes something names what (``where``) when it asks for `yes`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from govsync import envvars, redact
from govsync.errors import ConfigError, GovsyncError
from govsync.project import Selection, SettingValue, same_setting
from govsync.settings import Settings, resolve

if TYPE_CHECKING:
    from govsync.plan import Plan

# Commands that act on every environment, or take theirs from elsewhere (an argument,
# a saved plan: apply checks for itself, knowing whether it was given one).
EVERY_ENVIRONMENT = frozenset({"ui", "pause", "resume", "accept", "show", "apply",
                               "readonly-role"})


def require_environment(selection: Selection, command: str) -> None:
    """ConfigError when the project has environments and none is selected."""
    project = selection.project
    if project is None or not project.environments or selection.environment is not None:
        return
    if command in EVERY_ENVIRONMENT:
        return
    names = ", ".join(sorted(project.environments))
    raise ConfigError(f"{project.file} defines environments ({names}) and none is selected: "
                      f"pass --env NAME (or set {envvars.ENV}); nothing was sent")


def replaced_paths(selection: Selection, given: tuple[str, ...] | list[str]) -> str:
    """The line saying that paths on the command line replace the environment's ('' when
    they do not, or are the same)."""
    env = selection.environment
    if not given or env is None or selection.project is None:
        return ""
    theirs = selection.project.paths(env) or ()
    mine = {os.path.abspath(p) for p in given}
    left = [p for p in theirs if os.path.abspath(p) not in mine]
    if not left:
        return ""
    return (f"Note: the paths given replace environment {env.name}'s paths "
            f"({', '.join(theirs)}): {', '.join(left)} and the patches there are not read "
            "(give no PATH to plan the whole environment, --target to plan part of it).")


def saved_plan_settings(settings: Settings, plan: Plan, path: str) -> Settings:
    """The settings of ``apply PLAN`` / ``show PLAN``: the environment and workspace the
    plan records, unless given; given ones (and the state) that contradict it are an
    error."""
    ctx = click.get_current_context()
    selection = settings.selection
    project = selection.project
    if (plan.environment and selection.environment is None and project is not None
            and plan.environment in project.environments):
        selection = Selection(project, project.environments[plan.environment],
                              selection.overrides)
    if selection.name != plan.environment:
        mine = f"environment {selection.name}" if selection.name else "no environment"
        theirs = f"environment {plan.environment}" if plan.environment else "no environment"
        flag = f"--env {plan.environment}" if plan.environment else "no --env"
        raise ConfigError(f"{path} is a plan for {theirs}, and this run names {mine}: run it "
                          f"with {flag} (check {envvars.ENV}); nothing was sent")
    state = given(ctx, "state_url", ctx.params.get("state_url"), "--state", envvars.STATE)
    workspace = given(ctx, "workspace", ctx.params.get("workspace"), "--workspace",
                      envvars.WORKSPACE)
    # The plan's state is never taken from the file: whoever writes a plan file would
    # choose the state (and so the plan key) it is checked against. It must agree.
    if workspace.source == "default" and selection.environment is None:
        workspace = SettingValue(plan.workspace, "option", workspace.flag, workspace.variable)
    endpoint = given(ctx, "endpoint", ctx.params.get("endpoint"), "--endpoint",
                     envvars.ENDPOINT)
    scoped = resolve(selection, endpoint=endpoint, state=state, workspace=workspace,
                     environ=settings.environ, insecure_http=settings.insecure_http,
                     local_seed=settings.local_seed)
    # What the command's own options set (--target, --replace, --refresh) stays.
    scoped = dataclasses.replace(scoped, targets=settings.targets, replace=settings.replace,
                                 refresh=settings.refresh)
    # `show` of a plan where nobody named a state renders it unverified; apply refuses.
    defaulted_show = state.source == "default" and ctx.command.name == "show"
    if (plan.state and not defaulted_show
            and not same_setting("state", _comparable(scoped.state), plan.state)):
        raise ConfigError(
            f"{path} was made against state {plan.state}, and this run names state "
            f"{redact.url(scoped.state)}: drop --state ({envvars.STATE}), or make the plan "
            "again against this state; nothing was sent")
    return scoped


def _comparable(state: str) -> str:
    return state if "://" in state else os.path.abspath(state)


def given(ctx: click.Context, param: str, value: str | None, flag: str, variable: str) -> SettingValue:
    """A global option's value and where it came from (option, environment, default)."""
    source = ctx.get_parameter_source(param)
    where = ("option" if source == click.core.ParameterSource.COMMANDLINE
             else "environment" if source == click.core.ParameterSource.ENVIRONMENT
             else "default")
    return SettingValue(value, where, flag, variable)


@contextmanager
def new_state_said(settings: Settings, *, defaulted: bool) -> Iterator[None]:
    """Say in one line on stderr when the command made a new SQLite state in the
    default place (``defaulted``: nobody named one) and no project file names where
    states live (a command run from the wrong folder)."""
    # (A plain path, as the default is: this module stays clear of govsync.state,
    # which `validate` never loads.)
    path = settings.state
    before = not defaulted or "://" in path or os.path.lexists(path)
    try:
        yield
    finally:
        if not before and settings.selection.project is None and os.path.lexists(path):
            click.echo(f"Note: made a new state at {path} (there is no govsync.yaml here or "
                       "above; pass --state, or run from the project's folder, to use "
                       "another).", err=True)


def where(settings: Settings) -> str:
    """What a command acts on: environment, workspace, endpoint and state (masked)."""

    env = settings.selection.name
    return (f"environment {env}, " if env else "") + (
        f"workspace {settings.workspace!r}, endpoint "
        f"{redact.url(settings.endpoint) if settings.endpoint else '(none)'}, state "
        f"{redact.url(settings.state)}")


def prompt(settings: Settings) -> str:
    """The confirmation question, naming what it will change (contract section 5)."""
    return f"Apply these changes to {where(settings)}? Only 'yes' will be accepted"


def confirmed(prompt: str, *, cancelled: str = "apply cancelled",
              skip: str = "--auto-approve", does: str = "applies") -> bool:
    """Ask for `yes`: at a terminal, or as one line of standard input (``echo yes |``),
    as Terraform does.  End of input or any other answer cancels (GovsyncError:
    ``cancelled``, naming the flag that ``skip``s the question)."""
    stdin = sys.stdin
    if stdin.isatty():
        answer = str(click.prompt(prompt, default="", show_default=False))
    else:
        click.echo(f"{prompt}: ", nl=False, err=True)
        line = stdin.readline()
        if not line:
            click.echo("", err=True)
            raise GovsyncError(f"{cancelled}: standard input ended before an answer; "
                               f"nothing was changed (pipe `yes`, or pass {skip})")
        answer = line
        click.echo(answer.strip(), err=True)
    if answer.strip() != "yes":
        said = f"the answer was {answer.strip()[:40]!r}" if answer.strip() else "no answer"
        raise GovsyncError(f"{cancelled}: {said}, and only 'yes' {does}; "
                           "nothing was changed")
    return True
