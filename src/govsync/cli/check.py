"""`govsync validate`: the manifests and the project file, checked offline (no state,
no API); `govsync environments` is environments.py."""

from __future__ import annotations

import sys
from typing import Any

import click

from govsync.cli.root import load, out, paths_argument, project_options
from govsync.errors import GovsyncError, ManifestError, Problem
from govsync.manifests.manifest import ManifestSet
from govsync.project import Selection, section


@click.command()
@paths_argument
@project_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: {formatVersion, valid, errors: [{file, line, column, message}], "
                   "warnings: [the same]}.")
def validate(paths: tuple[str, ...], selection: Selection, fmt: str) -> None:
    """Check manifests offline: syntax, fields, references, cycles, code.

    Policies' and permissions' code is compiled as Rego, hooks' parsed as
    JavaScript modules (in a bounded worker process).

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
    warned: dict[Problem, list[str]] = {}
    for each in selections:
        try:
            manifests = load(paths, each, short=True, code=True, rules=True)
            warnings = manifests.warnings + _rules(manifests, each)
        except ManifestError as exc:
            for problem in exc.problems:
                found.setdefault(problem, []).append(each.name or "")
            for problem in exc.warnings:
                warned.setdefault(problem, []).append(each.name or "")
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
            warned.setdefault(warning, []).append(each.name or "")
    if len(selections) > 1:  # say which environment each error and warning belongs to
        found, warned = _named(found), _named(warned)
    if fmt == "json":
        from govsync.render.documents import dumps, validate_public

        click.echo(dumps(validate_public(found, sorted(warned))), nl=False)
        if found:
            sys.exit(1)
        return
    for warning in sorted(warned):
        click.echo(str(warning), err=True)
    if found:
        raise ManifestError(list(found))


def _named(problems: dict[Problem, list[str]]) -> dict[Problem, list[str]]:
    return {Problem(p.file, p.line, p.col, f"({_environments(envs)}) {p.message}"): envs
            for p, envs in problems.items()}


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
