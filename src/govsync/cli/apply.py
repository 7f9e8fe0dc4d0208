"""`govsync apply`: its own module, loaded when it runs, with apply's engine and its
reporters (a plan and the other review commands load neither)."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from typing import Any

import click

from govsync import planfile
from govsync.apply import DONE, ApplyResult
from govsync.cli.interrupt import graceful
from govsync.cli.root import (
    allow_endpoint_change_option,
    global_options,
    load,
    out,
    paths_argument,
    refresh_option,
    replace_option,
    target_option,
)
from govsync.cli.scope import (
    confirmed,
    prompt,
    require_environment,
    saved_plan_settings,
    where,
)
from govsync.commands import applying
from govsync.commands.sources import ApplyOptions, Manifests, Reviewed, Saved, Source
from govsync.errors import GovsyncError
from govsync.planfile import SavedPlan
from govsync.render.progress import JsonReporter, LineReporter, ProgressReporter
from govsync.render.text import plan_text
from govsync.settings import Settings


@click.command()
@paths_argument
@global_options
@target_option
@replace_option
@refresh_option
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
@allow_endpoint_change_option
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
        return _apply_json(paths, settings, saved_plan, reviewed, ApplyOptions(
            parallelism=parallelism, forget_orphans=forget_orphans, lock_timeout=lock_timeout,
            allow_endpoint_change=allow_endpoint_change))
    settings, source = _source(paths, settings, saved_plan, reviewed)

    def confirm(the_plan: Any) -> bool:
        o.info(f"Changing {where(settings)}.")
        click.echo(plan_text(the_plan, color=o.color), nl=False, color=o.color)
        if not (auto_approve or saved_plan or reviewed):
            confirmed(prompt(settings))
        # From here on, the first Ctrl-C lets what is in flight finish (cli/interrupt.py).
        stack.enter_context(graceful(stopping))
        return True

    reporter = (ProgressReporter(o.color, o.quiet) if o.color and sys.stderr.isatty()
                else LineReporter(o.color, o.quiet))
    stopping = threading.Event()
    with contextlib.ExitStack() as stack:
        the_plan, result = applying.apply(source, settings, ApplyOptions(
            parallelism=parallelism, forget_orphans=forget_orphans, lock_timeout=lock_timeout,
            allow_endpoint_change=allow_endpoint_change, confirm=confirm, reporter=reporter,
            stopping=stopping))
    if the_plan.governance is not None:
        click.echo(f"Recorded the governance of workspace {settings.workspace!r}.")
    if not result.outcomes:
        if the_plan.has_changes():
            # Only orphans or uncertain entries: nothing to send, but they are
            # reported (contract section 2), never hidden behind "No changes".
            click.echo(plan_text(the_plan, color=o.color), nl=False, color=o.color)
            click.echo("Nothing to apply.")
        else:
            click.echo("No changes. Nothing to apply.")
        if result.recorded:
            click.echo(f"Recorded {len(result.recorded)} object(s) as the server holds them, "
                       "which the manifests now match (changed outside govsync, then in git; "
                       f"nothing sent): {', '.join(result.recorded)}.")
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


def _source(paths: tuple[str, ...], settings: Settings, saved_plan: bool,
            reviewed: SavedPlan | None) -> tuple[Settings, Source]:
    """What apply applies, and to what: a saved plan with the environment, workspace
    and state it records; else the manifests of the selected environment (held to
    the reviewed plan, if one is given)."""
    if saved_plan:
        saved = planfile.read(paths[0])
        return saved_plan_settings(settings, saved.plan, paths[0]), Saved(saved)
    require_environment(settings.selection, "plan")
    manifests = load(paths, settings.selection, rules=True)
    if reviewed is not None:
        return settings, Reviewed(manifests, reviewed)
    return settings, Manifests(manifests)


def _apply_json(paths: tuple[str, ...], settings: Settings, saved_plan: bool,
                reviewed: SavedPlan | None, options: ApplyOptions) -> None:
    """``apply --format json``: JSON lines on stdout, the plan and messages on stderr.

    The summary line comes last whatever happens, an error before anything
    was sent included (its message is the summary's ``stopped``)."""
    o = out()
    reporter = JsonReporter()

    stopping = threading.Event()
    stack = contextlib.ExitStack()

    def show(the_plan: Any) -> bool:
        if not o.quiet:
            click.echo(plan_text(the_plan), nl=False, err=True)
        stack.enter_context(graceful(stopping))
        return True

    try:
        settings, source = _source(paths, settings, saved_plan, reviewed)
        with stack:
            _plan, result = applying.apply(source, settings, dataclasses.replace(
                options, confirm=show, reporter=reporter, stopping=stopping))
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
