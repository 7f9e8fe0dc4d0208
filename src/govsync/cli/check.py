"""`govsync validate` and `govsync environments`: the manifests and the project file,
checked offline (no state, no API)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from govsync.cli import envcheck
from govsync.cli.root import echo_json, json_errors, load, out, paths_argument, project_options
from govsync.errors import GovsyncError, ManifestError, Problem
from govsync.manifests.model import ManifestSet
from govsync.project import Selection, section


@click.command()
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


def _environments(names: list[str]) -> str:
    if len(names) == 1:
        return f"environment {names[0]}"
    return "environments " + ", ".join(names)


def _rules(manifests: ManifestSet, selection: Selection) -> list[Any]:
    """The project's rules on loaded manifests: their warnings (ManifestError for errors)."""
    if not selection.rules:
        return []  # (without importing the rules engine)

    # The rules' module: loaded already, where it parsed the project's rules.
    found = section("rules").check_manifests(manifests, selection.rules, selection.name)
    return list(found.warnings)


@click.command("environments")
@json_errors
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: one name per line, in the project file's order; json: each with "
                   "its workspace, endpoint, state (credentials masked), paths, approvals, "
                   "the variables holding its keys and its problems.")
@click.option("--check", is_flag=True,
              help="Check every environment's settings as a job would resolve them: one "
                   "line per missing or contradicting setting (exit 1), naming the variable.")
@click.option("--read-only", is_flag=True,
              help="With --check: for a job that only reads (a pull request's plan, drift): "
                   "an environment's viewer key will do.")
def environments_command(selection: Selection, fmt: str, check: bool, read_only: bool) -> None:
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
    """
    from govsync.render.documents import environments_public

    project = selection.project
    approvals = project.approvals if project is not None else None
    resolved = envcheck.every(selection, os.environ, read_only=read_only)
    if check:
        problems = [f"environment {r.name}: {p}" for r in resolved for p in r.problems]
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
                "problems": r.problems,
                # A CI job's repository-wide values that are not for this environment.
                "contradicting": r.contradicting})
        echo_json(environments_public(project.file if project else None, rows))
        return
    for r in resolved:
        click.echo(r.name)
