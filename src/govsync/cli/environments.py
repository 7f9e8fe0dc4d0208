"""`govsync environments`: the project file's environments, each resolved as a job
would resolve it (envcheck.py), in its own module so that validate does not load it."""

from __future__ import annotations

import os
import sys

import click

from govsync.cli import envcheck
from govsync.cli.root import echo_json, json_errors, out, project_options
from govsync.project import Selection


@click.command("environments")
@json_errors
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: one name per line, in the project file's order; json: each with "
                   "its workspace, endpoint, state (credentials masked), paths, approvals, "
                   "impact settings, the variables holding its keys and its problems.")
@click.option("--check", is_flag=True,
              help="Check every environment's settings as a job would resolve them: one "
                   "line per missing or contradicting setting (exit 1), naming the variable; "
                   "the default SQLite state is a warning (fine on one machine), not a "
                   "failure.")
@click.option("--strict", is_flag=True,
              help="With --check: warnings fail too (a CI job, whose own default SQLite "
                   "state would be new and empty each run).")
@click.option("--read-only", is_flag=True,
              help="With --check: for a job that only reads (a pull request's plan, drift): "
                   "an environment's viewer key will do.")
def environments_command(selection: Selection, fmt: str, check: bool, strict: bool,
                         read_only: bool) -> None:
    """List the environments of the project file (nothing when it has none).

    Each is resolved as a command run with --env NAME would resolve it (the
    environment variables included), so a CI job can loop over them and check
    their settings first. Listing never fails on settings: a variable that
    contradicts an environment is that environment's problem (json: problems;
    --check: one line each).

    \b
    Example:
      for env in $(govsync environments); do govsync plan --env "$env"; done
      govsync environments --format json
      govsync environments --check --read-only
      govsync environments --check --strict    # in CI: a state jobs share
    """
    from govsync.render.documents import environments_public, impact_public

    project = selection.project
    approvals = project.approvals if project is not None else None
    resolved = envcheck.every(selection, os.environ, read_only=read_only)
    if check:
        problems = [f"environment {r.name}: {p}" for r in resolved
                    for p in (*r.problems, *(r.warnings if strict else ()))]
        if not strict:
            for r in resolved:
                for warning in r.warnings:
                    click.echo(f"environment {r.name}: warning: {warning}", err=True)
        for line in problems:
            click.echo(line, err=True)
        if problems:
            sys.exit(1)
        out().info(f"The settings of {len(resolved)} environment(s) are complete.")
        return
    if fmt == "json":
        rows = []
        for r in resolved:
            assert project is not None
            env = project.environments[r.name]
            chosen = Selection(project, env, selection.overrides)
            rows.append({
                "name": r.name, **{k: r.values[k] for k in ("workspace", "endpoint", "state",
                                                          "apiKey", "viewerKey")},
                "paths": list(chosen.paths(())),
                "approvals": (approvals.required if approvals is not None and (
                    approvals.environments is None or env.name in approvals.environments)
                    else 0),
                "problems": r.problems, "warnings": r.warnings,
                # A CI job's repository-wide values that are not for this environment.
                "contradicting": r.contradicting,
                # What its plans measure of a policy change's impact (the CI templates
                # replay `from` where no report key is set).
                "impact": impact_public(chosen.impact)})
        echo_json(environments_public(project.file if project else None, rows,
                                      impact_public(selection.impact)))
        return
    for r in resolved:
        click.echo(r.name)
