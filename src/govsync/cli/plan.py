"""`govsync plan`: its own module, so that a plan loads neither apply's engine nor the
approvals' signatures nor the graphs (workflow.py holds the rest of the review
workflow)."""

from __future__ import annotations

import os
import sys

import click

from govsync import impacts
from govsync.cli.root import (
    FORMATS,
    allow_endpoint_change_option,
    global_options,
    json_errors,
    load,
    out,
    paths_argument,
    refresh_option,
    replace_option,
    target_option,
)
from govsync.commands import planning
from govsync.commands.workspace import Workspace
from govsync.errors import ConfigError
from govsync.manifests.manifest import ManifestSet
from govsync.plan import Plan
from govsync.render.reasons import blocked_advice
from govsync.render.text import plan_text
from govsync.settings import Settings


@click.command()
@json_errors
@paths_argument
@global_options
@target_option
@replace_option
@refresh_option
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
@click.option("--impact", "impact_window", metavar="WINDOW",
              help="Measure what each created or code-changed policy would block, mask or "
                   "rewrite over the requests logged in the last WINDOW (7d, 36h), with the "
                   "endpoint's impact reports (GOVSYNC_REPORT_API_KEY where set).")
@click.option("--impact-from", "impact_from", metavar="FILE",
              help="Measure impact by replaying a file of recorded inputs locally (JSON "
                   "lines {time, stage, input}), with the engine of validate and test; "
                   "with --impact, only where the endpoint's reports cannot be had.")
@allow_endpoint_change_option
def plan(paths: tuple[str, ...], settings: Settings, out_file: str | None, fmt: str,
         without_secrets: bool, detailed_exitcode: bool, allow_endpoint_change: bool,
         impact_window: str | None, impact_from: str | None) -> None:
    """Show what apply would change: create, update, no-op, blocked, orphan, uncertain.

    Reads the state without locking it and sends no write to the API. With an
    endpoint, checks that policy owner groups exist (ListGroups).

    \b
    Example:
      govsync plan manifests/ --out plan.json
      govsync plan manifests/ --format markdown > comment.md
      govsync plan manifests/ --format html > plan.html
      govsync plan manifests/ --impact 7d
      govsync plan manifests/ --impact-from recorded.jsonl
    """

    # A window that is not one is an error before anything is read (exit 1).
    impact = impacts.requested(settings.selection.impact, impact_window, impact_from)
    if out_file and not os.path.isdir(os.path.dirname(os.path.abspath(out_file))):
        # Before the plan, which may make the workspace for the file: nothing is left.
        raise ConfigError(f"cannot write the plan to {out_file}: its folder does not exist")
    # The state opened once, for the plan and its file.
    with Workspace(settings) as workspace:
        manifests = load(paths, settings.selection, short=True, rules=True)
        result = planning.plan(manifests, settings, saving=bool(out_file),
                               read_secrets=not without_secrets, workspace=workspace,
                               allow_endpoint_change=allow_endpoint_change, impact=impact)
        _show_plan(result, fmt, settings, manifests)
        review_only = _save(result, settings, out_file, manifests, workspace) if out_file else ""
    o = out()
    blocked = len(result.blocked())
    why = (f"{blocked} blocked change(s), so apply will refuse this plan: "
           f"{blocked_advice(result.blocked())}; then plan again.")
    if out_file:
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


def _save(result: Plan, settings: Settings, out_file: str, manifests: ManifestSet,
          workspace: Workspace) -> str:
    """``plan --out``: the saved plan written (its file format, the plan key and the
    audit fields load only here)."""
    from govsync.commands.saving import write_plan

    return write_plan(result, settings, out_file, manifests, workspace=workspace)


def _show_plan(result: Plan, fmt: str, settings: Settings, manifests: ManifestSet) -> None:
    o = out()
    if fmt == "json":
        from govsync.render.planjson import plan_json_chunks  # only for this format

        for chunk in plan_json_chunks(result):
            click.echo(chunk, nl=False)
    elif fmt == "markdown":
        from govsync.render.markdown import plan_markdown  # only for this format

        click.echo(plan_markdown(result), nl=False)
    elif fmt == "html":
        from govsync.ui import plan_file

        click.echo(plan_file(result, settings.selection, manifests), nl=False)
    else:
        click.echo(plan_text(result, color=o.color, verbose=o.verbose > 0), nl=False,
                   color=o.color)
